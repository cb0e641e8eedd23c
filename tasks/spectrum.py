"""Spectrum of the Google matrix at α = 1 and its invariant subspaces (seed 003, part 1, §5, eq. 4).

At α = 1, ``G = S`` (dangling columns = 1/N). A dangling node links to every node, so any node that
can reach a dangling node can reach the whole graph: those nodes form the **core**. The other nodes
— those that **cannot reach the core** — span subspaces invariant under S (no arc leaves them), and
in the node order (subspace, core) S is block triangular, ``S = [[S_ss, S_sc], [0, S_cc]]`` (eq. 4).

**The subspaces, as the paper counts them** (its refs. [14, 15], Frahm, Georgeot & Shepelyansky):
for each node outside the core, the set of nodes reachable from it; sets that share a node are
merged. ``N_s`` is their total size, ``N_d`` their number, ``d_max`` the largest. Since no arc leaves
the subspace part, merging "v with everything v reaches" gives exactly the weakly connected
components of the subgraph on those nodes, which is how they are computed here.

**The eigenvalue λ = 1**: every strongly connected component of the subspace part with no arc
leaving it (a sink of the SCC condensation) is an irreducible stochastic block and contributes
exactly one λ = 1 (plus the other roots of unity if it is periodic); the core block ``S_cc`` loses
mass (dangling columns spread 1/N onto the subspace rows too), so its eigenvalues have |λ| < 1 —
unless the subspace part is empty and then S itself is irreducible. So ``N_1`` = the number of
sink SCCs (or 1 when there is none), and ``N_1 ≥ N_d``: one merged subspace can hold several sinks
(a page linking to two closed loops), which is why the paper's Table 2 has N_1 > N_d. (Before
2026-11-24 raycrawl counted each sink SCC as a subspace, which forced N_1 = N_d.)

The subspace eigenvalues come exactly from dense diagonalisation of each SCC diagonal block of the
subspace part, the core's largest ones from an Arnoldi iteration on ``S_cc`` as a linear operator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigs

from raycrawl.tasks.pagerank import LinkMatrix, gather_sum

log = logging.getLogger(__name__)

UNIT_CIRCLE_TOL = 1e-8  # |λ| within this of 1 counts as on the unit circle (N_circ)
DEFAULT_ARNOLDI_DIM = 200  # n_A; the paper's 6,000 needs n_A × N_core × 8 bytes (13.8 GB on cnr-2000)


@dataclass
class SubspaceDecomposition:
    """The split of the nodes into invariant subspaces and core (paper's Table 2 quantities)."""

    core: np.ndarray  # bool mask: the node can reach a dangling node
    component: np.ndarray  # SCC label of each node
    sink_components: np.ndarray  # labels of the sink SCCs outside the core (one λ = 1 each)
    subspace: np.ndarray  # the paper's merged invariant subspace of each node, -1 for core nodes

    @property
    def N_s(self) -> int:
        """Total number of nodes in the subspace part (cannot reach the core)."""
        return int((~self.core).sum())

    @property
    def N_d(self) -> int:
        """Number of invariant subspaces (reachable sets merged; see the module doc)."""
        return int(self.subspace.max()) + 1 if len(self.subspace) else 0

    @property
    def d_max(self) -> int:
        """Size of the largest invariant subspace (0 if none)."""
        if not self.N_d:
            return 0
        return int(np.bincount(self.subspace[self.subspace >= 0]).max())

    @property
    def N_1(self) -> int:
        """Predicted multiplicity of the eigenvalue λ = 1 of S: one per sink SCC outside the core."""
        return len(self.sink_components) if len(self.sink_components) else int(self.core.any())

    def as_dict(self) -> dict[str, int]:
        return {"N": len(self.core), "N_s": self.N_s, "N_d": self.N_d, "d_max": self.d_max, "N_1": self.N_1}


def _successor_graph(matrix: LinkMatrix) -> sp.csr_matrix:
    succ = matrix.reversed()
    n = matrix.num_nodes
    return sp.csr_matrix(
        (np.ones(succ.num_arcs, dtype=np.int8), succ.pred_indices, succ.pred_indptr), shape=(n, n)
    )


def invariant_subspaces(matrix: LinkMatrix) -> SubspaceDecomposition:
    """Core (nodes that reach a dangling node), the sink SCCs among the other nodes and the
    paper's merged invariant subspaces (module doc)."""
    n = matrix.num_nodes
    # Nodes that reach a dangling node: BFS over predecessor arcs from a virtual node linked to all
    # dangling nodes (one BFS instead of one per dangling node).
    pred = sp.csr_matrix(
        (np.ones(matrix.num_arcs, dtype=np.int8), matrix.pred_indices, matrix.pred_indptr), shape=(n, n)
    )
    virtual = sp.csr_matrix(
        (np.ones(len(matrix.dangling), dtype=np.int8), matrix.dangling, [0, len(matrix.dangling)]), shape=(1, n)
    )
    aug = sp.bmat([[pred, None], [virtual, None]], format="csr")
    aug.resize((n + 1, n + 1))
    reached = csgraph.breadth_first_order(aug, n, directed=True, return_predecessors=False)
    core = np.zeros(n, dtype=bool)
    core[reached[reached < n]] = True
    successors = _successor_graph(matrix)
    _, comp = csgraph.connected_components(successors, directed=True, connection="strong")
    # A component is a sink if no arc leaves it.
    succ = matrix.reversed()
    src = np.repeat(np.arange(n), np.diff(succ.pred_indptr))
    leaving = comp[src] != comp[succ.pred_indices]
    not_sink = np.zeros(comp.max() + 1 if n else 0, dtype=bool)
    not_sink[comp[src[leaving]]] = True
    subspace_comps = np.unique(comp[~core])
    sinks = subspace_comps[~not_sink[subspace_comps]]
    sub = np.flatnonzero(~core)
    subspace = np.full(n, -1, dtype=np.int64)
    if len(sub):
        _, weak = csgraph.connected_components(successors[sub][:, sub], directed=True, connection="weak")
        subspace[sub] = weak
    return SubspaceDecomposition(core, comp, sinks, subspace)


def _block(matrix: LinkMatrix, nodes: np.ndarray) -> np.ndarray:
    """Dense S restricted to ``nodes`` (rows and columns); no dangling node is ever in a subspace."""
    pos = {int(v): i for i, v in enumerate(nodes)}
    b = np.zeros((len(nodes), len(nodes)))
    for i, v in enumerate(nodes):
        for j in matrix.pred_indices[matrix.pred_indptr[v] : matrix.pred_indptr[v + 1]]:
            if int(j) in pos:
                b[i, pos[int(j)]] = matrix.inv_outdegree[j]
    return b


def subspace_eigenvalues(matrix: LinkMatrix, dec: SubspaceDecomposition, max_block: int = 1500) -> np.ndarray:
    """Exact eigenvalues of S_ss: dense eigenvalues of each SCC diagonal block of the subspace part.

    Blocks larger than ``max_block`` nodes are skipped (logged); size-1 blocks without a self-loop give 0.
    """
    out: list[np.ndarray] = []
    sub_nodes = np.flatnonzero(~dec.core)
    if not len(sub_nodes):
        return np.zeros(0, dtype=complex)
    order = np.argsort(dec.component[sub_nodes], kind="stable")
    nodes_sorted = sub_nodes[order]
    labels = dec.component[nodes_sorted]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], len(labels)]
    sizes = ends - starts
    # 1×1 blocks (most of them on web graphs): the eigenvalue is the node's self-loop weight, or 0.
    singles = nodes_sorted[starts[sizes == 1]]
    succ = matrix.reversed()
    self_loop = np.array(
        [v in succ.pred_indices[succ.pred_indptr[v] : succ.pred_indptr[v + 1]] for v in singles.tolist()], dtype=bool
    )
    out.append(np.where(self_loop, matrix.inv_outdegree[singles], 0.0).astype(complex))
    skipped = 0
    for s, e in zip(starts[sizes > 1], ends[sizes > 1], strict=True):
        nodes = nodes_sorted[s:e]
        if len(nodes) > max_block:
            skipped += len(nodes)
            continue
        out.append(np.linalg.eigvals(_block(matrix, nodes)).astype(complex))
    if skipped:
        log.warning("subspace spectrum: skipped %d nodes in blocks larger than %d", skipped, max_block)
    return np.concatenate(out) if out else np.zeros(0, dtype=complex)


def core_operator(matrix: LinkMatrix, core: np.ndarray) -> LinearOperator:
    """``S_cc`` (α = 1, dangling columns 1/N) restricted to the core nodes, as a linear operator."""
    n = matrix.num_nodes
    idx = np.flatnonzero(core)
    dangling_core = np.intersect1d(matrix.dangling, idx)
    full = np.zeros(n)
    out = np.empty(n)

    def matvec(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x).ravel()
        if np.iscomplexobj(x):
            return matvec(x.real) + 1j * matvec(x.imag)
        full[:] = 0.0
        full[idx] = x
        gather_sum(matrix.pred_indptr, matrix.pred_indices, full * matrix.inv_outdegree, out)
        return out[idx] + full[dangling_core].sum() / n

    return LinearOperator((len(idx), len(idx)), matvec=matvec, dtype=np.float64)


def arnoldi_ritz_values(op: LinearOperator, n_arnoldi: int, seed: int = 0) -> np.ndarray:
    """Ritz values of ``op`` from one Arnoldi run of dimension ``n_arnoldi`` (the paper's method, no restart).

    Modified Gram–Schmidt with one re-orthogonalisation; stops early on breakdown (an invariant Krylov
    space: the Ritz values are then exact eigenvalues). Memory: ``n_arnoldi × N`` floats.
    """
    m = op.shape[0]
    n_a = min(n_arnoldi, m)
    q = np.zeros((n_a + 1, m))
    h = np.zeros((n_a + 1, n_a))
    v = np.random.default_rng(seed).random(m)
    q[0] = v / np.linalg.norm(v)
    size = n_a
    for j in range(n_a):
        w = op.matvec(q[j])
        for _ in range(2):  # classical GS twice ("twice is enough") via BLAS
            c = q[: j + 1] @ w
            w -= c @ q[: j + 1]
            h[: j + 1, j] += c
        h[j + 1, j] = np.linalg.norm(w)
        if h[j + 1, j] <= 1e-12 * max(1.0, np.abs(h[: j + 1, j]).max()):
            size = j + 1
            break
        q[j + 1] = w / h[j + 1, j]
    return np.linalg.eigvals(h[:size, :size])


def core_eigenvalues(
    matrix: LinkMatrix,
    core: np.ndarray,
    k: int = 20,
    tol: float = 1e-9,
    max_restarts: int = 100,
    ncv: int = 0,
    method: str = "arnoldi",
    n_arnoldi: int = DEFAULT_ARNOLDI_DIM,
) -> np.ndarray:
    """The ``k`` largest-modulus eigenvalues of ``S_cc``, sorted by decreasing |λ|.

    ``method="arnoldi"`` (default): one Arnoldi run of dimension ``n_arnoldi`` as in the paper (its
    ``n_A``); the top Ritz values approximate the top eigenvalues (exact when the Krylov space closes).
    ``method="arpack"``: ARPACK's implicitly restarted Arnoldi to tolerance ``tol`` (``ncv`` default
    ``max(2k + 1, 40)``); slow on web graphs whose core eigenvalues crowd near |λ| = 1 — if it has not
    converged after ``max_restarts`` restarts the converged ones are returned (logged).
    Small cores (≤ 64 nodes) are diagonalised densely.
    """
    m = int(core.sum())
    if m == 0:
        return np.zeros(0, dtype=complex)
    op = core_operator(matrix, core)
    if m < k + 2 or m <= 64:
        vals = np.linalg.eigvals(op @ np.eye(m))
    elif method == "arnoldi":
        vals = arnoldi_ritz_values(op, max(n_arnoldi, 2 * k))
    else:
        try:
            vals = eigs(op, k=k, which="LM", return_eigenvectors=False, tol=tol, maxiter=max_restarts,
                        ncv=min(m - 1, ncv or max(2 * k + 1, 40)))
        except ArpackNoConvergence as exc:
            log.warning("ARPACK converged only %d of %d eigenvalues", len(exc.eigenvalues), k)
            vals = exc.eigenvalues
    vals = np.asarray(vals, dtype=complex)
    return vals[np.argsort(-np.abs(vals), kind="stable")][:k]


@dataclass
class Spectrum:
    decomposition: SubspaceDecomposition
    subspace: np.ndarray  # exact eigenvalues of S_ss
    core: np.ndarray  # top eigenvalues of S_cc (Arnoldi)
    n_arnoldi: int = DEFAULT_ARNOLDI_DIM

    @property
    def N_circ(self) -> int:
        """Eigenvalues found on the unit circle (|λ| = 1: λ = 1 and the other roots of unity of
        periodic subspaces), the paper's N_circ."""
        return int((np.abs(np.abs(self.subspace) - 1.0) < UNIT_CIRCLE_TOL).sum()
                   + (np.abs(np.abs(self.core) - 1.0) < UNIT_CIRCLE_TOL).sum())

    def as_dict(self, top: int = 10) -> dict:
        def fmt(v: np.ndarray) -> list[list[float]]:
            v = v[np.argsort(-np.abs(v), kind="stable")][:top]
            return [[round(float(z.real), 12), round(float(z.imag), 12)] for z in v]

        unit = int((np.abs(self.subspace - 1.0) < 1e-8).sum() + (np.abs(self.core - 1.0) < 1e-8).sum())
        return {
            **self.decomposition.as_dict(),
            "unit_eigenvalues_found": unit,
            "N_circ": self.N_circ,
            "n_arnoldi": self.n_arnoldi,
            "core_top": fmt(self.core),
            "subspace_top": fmt(self.subspace),
        }


def google_spectrum(matrix: LinkMatrix, k: int = 20, max_block: int = 1500,
                    n_arnoldi: int = DEFAULT_ARNOLDI_DIM) -> Spectrum:
    """Invariant subspaces + their exact eigenvalues + the ``k`` top core eigenvalues from one
    Arnoldi run of dimension ``n_arnoldi`` (the paper's n_A; the slow path). For G*, pass
    ``matrix.reversed()``."""
    dec = invariant_subspaces(matrix)
    log.info("spectrum: N_s=%d N_d=%d d_max=%d core=%d", dec.N_s, dec.N_d, dec.d_max, int(dec.core.sum()))
    return Spectrum(dec, subspace_eigenvalues(matrix, dec, max_block),
                    core_eigenvalues(matrix, dec.core, k, n_arnoldi=n_arnoldi), n_arnoldi)
