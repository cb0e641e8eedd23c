"""PageRank of the Google matrix by power iteration: single-process and as Ray tasks (seed 003, part 1).

The Google matrix is ``G = α S + (1 − α) v 1ᵀ`` where ``S`` is the column-stochastic transition matrix
of the graph (``S[i, j] = 1/outdeg(j)`` for each arc ``j → i``) with the columns of dangling nodes
(no out-links) replaced by ``v``; for plain PageRank ``v = 1/N`` — exactly the paper's eq. (1).
With a personalization vector ``v`` (any non-negative vector, normalised to sum 1) both the
teleport and the dangling columns follow ``v``, which is personalized PageRank as in seed 003
part 3 eq. (3) with ``c = 1 − α`` (and networkx's convention).

One power-iteration step is ``x' = α·Mᵀ(x ⊘ d) + (α·Σ_dangling x + (1 − α))·v`` where ``Mᵀ`` is the
in-link adjacency (rows = targets) and ``d`` the outdegrees. The in-link gather is the hot loop: a
numba kernel that reads only the column indices (no value array: the ``1/d`` scaling is applied once
per node, not once per arc), parallel over rows, each row summed sequentially so that the result
is bit-for-bit independent of how rows are split — which is what makes the distributed path
(``DistributedPageRank``: one Ray task per row block per iteration) return the same vector.

Iteration stops when the L1 change ``‖x' − x‖₁`` falls below ``tol``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import numba
import numpy as np

from raycrawl.storage.bvgraph import csr_from_arcs

log = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.85
DEFAULT_TOL = 1e-10
DEFAULT_MAX_ITER = 1000


@numba.njit(parallel=True, cache=True, nogil=True)
def _gather_sum(indptr, indices, z, out):  # pragma: no cover - compiled
    """out[i] = Σ z[indices[k]] for k in row i; each row summed left to right (deterministic)."""
    n = out.shape[0]
    for i in numba.prange(n):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            acc += z[indices[k]]
        out[i] = acc


# Reductions (dangling mass, L1 residual) are summed over a fixed number of row chunks, each chunk
# left to right, then the chunk totals in order: the result is the same whatever the thread count,
# so single-process, any --threads and the distributed path agree bit for bit.
CHUNKS = 256
_EMPTY = np.zeros(0)


@numba.njit(parallel=True, cache=True, nogil=True)
def _scale(x, inv_outdegree, z):  # pragma: no cover - compiled
    """z = x ⊘ outdegree; returns the mass Σ x[j] over dangling nodes (inv_outdegree == 0)."""
    n = x.shape[0]
    part = np.zeros(CHUNKS)
    for c in numba.prange(CHUNKS):
        s = 0.0
        for j in range(c * n // CHUNKS, (c + 1) * n // CHUNKS):
            w = inv_outdegree[j]
            z[j] = x[j] * w
            if w == 0.0:
                s += x[j]
        part[c] = s
    total = 0.0
    for c in range(CHUNKS):
        total += part[c]
    return total


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(acc, alpha, spread, vi):  # pragma: no cover - compiled
    return alpha * acc + spread * vi


@numba.njit(parallel=True, cache=True, nogil=True)
def _step(indptr, indices, z, v, vi, alpha, spread, x, y):  # pragma: no cover - compiled
    """y = α·gather(z) + spread·v, fused with the gather; returns ‖y − x‖₁.

    ``v`` empty means the uniform vector ``vi`` (saves reading v: the loop is memory-bound)."""
    n = y.shape[0]
    uniform = v.shape[0] == 0
    part = np.zeros(CHUNKS)
    for c in numba.prange(CHUNKS):
        r = 0.0
        for i in range(c * n // CHUNKS, (c + 1) * n // CHUNKS):
            acc = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                acc += z[indices[k]]
            yi = _mix(acc, alpha, spread, vi if uniform else v[i])
            y[i] = yi
            r += abs(yi - x[i])
        part[c] = r
    total = 0.0
    for c in range(CHUNKS):
        total += part[c]
    return total


@numba.njit(parallel=True, cache=True, nogil=True)
def _combine(acc, v, vi, alpha, spread, x, y):  # pragma: no cover - compiled
    """y = α·acc + spread·v (acc = gathered sums from the blocks); returns ‖y − x‖₁ (same order as _step)."""
    n = y.shape[0]
    uniform = v.shape[0] == 0
    part = np.zeros(CHUNKS)
    for c in numba.prange(CHUNKS):
        r = 0.0
        for i in range(c * n // CHUNKS, (c + 1) * n // CHUNKS):
            yi = _mix(acc[i], alpha, spread, vi if uniform else v[i])
            y[i] = yi
            r += abs(yi - x[i])
        part[c] = r
    total = 0.0
    for c in range(CHUNKS):
        total += part[c]
    return total


def gather_sum(indptr: np.ndarray, indices: np.ndarray, z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Row sums of ``z`` gathered through a CSR pattern: ``out[i] = Σ_{k ∈ row i} z[indices[k]]``."""
    if out is None:
        out = np.empty(len(indptr) - 1, dtype=np.float64)
    _gather_sum(indptr, indices, z, out)
    return out


def _index_dtype(n: int) -> type:
    # Unsigned: numba then skips the negative-index wraparound test in the gather (≈2× faster here).
    return np.uint32 if n < 2**32 - 1 else np.uint64


def csr_from_edges(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the arcs ``src[k] → dst[k]`` (rows = sources, successors sorted).

    Duplicate arcs are kept once (a page linking twice to the same target is one arc, as in WebGraph).
    This is :func:`storage.bvgraph.csr_from_arcs` with the unsigned index type the gather kernel wants.
    """
    indptr, indices = csr_from_arcs(n, src, dst)
    return indptr, indices.astype(_index_dtype(n))


def transpose_csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the reversed graph (predecessor lists, sorted)."""
    counts = np.diff(indptr)
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    return csr_from_edges(indices, src, n)


@dataclass
class LinkMatrix:
    """The transition structure of a graph as needed by PageRank: predecessor CSR plus outdegrees.

    ``pred_indptr/pred_indices``: for each node ``i`` the nodes ``j`` with an arc ``j → i``;
    ``outdegree[j]``: number of distinct successors of ``j`` (0 = dangling).
    """

    pred_indptr: np.ndarray
    pred_indices: np.ndarray
    outdegree: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.outdegree)
        assert len(self.pred_indptr) == n + 1, "indptr must have N+1 entries"
        assert self.pred_indptr[-1] == len(self.pred_indices) == int(self.outdegree.sum()), "arc count mismatch"
        self.pred_indptr = np.ascontiguousarray(self.pred_indptr, dtype=_index_dtype(len(self.pred_indices)))
        self.pred_indices = np.ascontiguousarray(self.pred_indices, dtype=_index_dtype(n))
        with np.errstate(divide="ignore"):
            self.inv_outdegree = np.where(self.outdegree > 0, 1.0 / np.maximum(self.outdegree, 1), 0.0)
        self.dangling = np.flatnonzero(self.outdegree == 0)
        self._reversed: LinkMatrix | None = None  # cached: CheiRank and HITS need both directions

    @property
    def num_nodes(self) -> int:
        return len(self.outdegree)

    @property
    def num_arcs(self) -> int:
        return len(self.pred_indices)

    @classmethod
    def from_successors(cls, indptr: np.ndarray, indices: np.ndarray) -> LinkMatrix:
        """PageRank structure of the graph given by its successor CSR (the forward BV graph).

        Successor lists must be duplicate-free (BV graphs and ``csr_from_edges`` output are)."""
        n = len(indptr) - 1
        pind, pidx = transpose_csr(indptr, indices, n)
        m = cls(pind, pidx, np.diff(indptr).astype(np.int64))
        m._reversed = LinkMatrix(indptr, indices, np.diff(pind).astype(np.int64))
        m._reversed._reversed = m
        return m

    def reversed(self) -> LinkMatrix:
        """The structure of the reversed graph (whose PageRank is the CheiRank)."""
        if self._reversed is None:
            n = self.num_nodes
            succ_indptr, succ_indices = transpose_csr(self.pred_indptr, self.pred_indices, n)
            self._reversed = LinkMatrix(succ_indptr, succ_indices, np.diff(self.pred_indptr).astype(np.int64))
            self._reversed._reversed = self
        return self._reversed

    def row_blocks(self, num_blocks: int) -> list[tuple[int, int]]:
        """Split rows into ``num_blocks`` contiguous ranges of about equal work (rows + arcs)."""
        n = self.num_nodes
        num_blocks = max(1, min(num_blocks, n))
        work = self.pred_indptr + np.arange(n + 1)
        cuts = np.searchsorted(work, np.linspace(0, work[-1], num_blocks + 1)[1:-1])
        bounds = [0, *sorted(set(int(c) for c in cuts) - {0, n}), n]
        return list(zip(bounds[:-1], bounds[1:], strict=True))


@dataclass
class PageRankResult:
    """A stationary vector and how it was obtained."""

    vector: np.ndarray
    iterations: int
    residuals: list[float] = field(default_factory=list)
    converged: bool = True
    seconds: float = 0.0
    nodes_used: set[str] = field(default_factory=set)  # Ray nodes that ran blocks (distributed only)

    @property
    def seconds_per_iteration(self) -> float:
        return self.seconds / max(self.iterations, 1)


def teleport_vector(n: int, personalization: np.ndarray | None) -> np.ndarray:
    """The normalised teleport distribution ``v`` (uniform when ``personalization`` is None).

    Raises ValueError for a vector of the wrong length, with negative or non-finite entries, or summing to 0.
    """
    if personalization is None:
        return np.full(n, 1.0 / n)
    p = np.asarray(personalization, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"personalization has shape {p.shape}, expected ({n},)")
    if not np.all(np.isfinite(p)) or (p < 0).any():
        raise ValueError("personalization must be finite and non-negative")
    total = p.sum()
    if total <= 0:
        raise ValueError("personalization sums to 0")
    return p / total


class _Stepper:
    """One power-iteration step ``x → y``; subclasses differ only in where the gather runs."""

    def __init__(self, matrix: LinkMatrix) -> None:
        self.matrix = matrix
        self.uniform = False  # set by _power_iteration: v is the constant 1/N

    def step(self, z: np.ndarray, v: np.ndarray, alpha: float, spread: float, x: np.ndarray, y: np.ndarray) -> float:
        m = self.matrix
        return _step(m.pred_indptr, m.pred_indices, z, self._v(v), v[0], alpha, spread, x, y)

    def _v(self, v: np.ndarray) -> np.ndarray:
        return _EMPTY if self.uniform else v


def _power_iteration(
    stepper: _Stepper,
    alpha: float,
    tol: float,
    max_iter: int,
    personalization: np.ndarray | None,
    start: np.ndarray | None,
) -> PageRankResult:
    m = stepper.matrix
    n = m.num_nodes
    if n == 0:
        return PageRankResult(np.zeros(0), 0)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    v = teleport_vector(n, personalization)
    stepper.uniform = personalization is None
    x = v.copy() if start is None else teleport_vector(n, start)
    y = np.empty(n)
    z = np.empty(n)
    residuals: list[float] = []
    t0 = time.perf_counter()
    converged = False
    for _ in range(max_iter):
        # Mass on dangling nodes and the teleport mass both go to v: the columns of G sum to 1.
        spread = alpha * _scale(x, m.inv_outdegree, z) + (1.0 - alpha)
        residuals.append(float(stepper.step(z, v, alpha, spread, x, y)))
        x, y = y, x
        if residuals[-1] < tol:
            converged = True
            break
    seconds = time.perf_counter() - t0
    if not converged:
        log.warning("PageRank did not converge in %d iterations (L1 residual %.3g)", max_iter, residuals[-1])
    x /= x.sum()  # rounding drift only: the iteration preserves the total mass
    return PageRankResult(x, len(residuals), residuals, converged, seconds)


def auto_threads() -> int:
    """Kernel threads: all cores when the machine is idle, 1 when it is busy.

    A parallel loop is as slow as its slowest thread; on a loaded machine one descheduled thread
    stalls every iteration (measured here: 2 threads 1.9× slower than 1 at load 12 on 2 CPUs).
    """
    cores = numba.config.NUMBA_NUM_THREADS
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - platforms without load average
        return cores
    return cores if load + cores <= (os.cpu_count() or 1) + 0.5 else 1


def pagerank(
    matrix: LinkMatrix,
    alpha: float = DEFAULT_ALPHA,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    personalization: np.ndarray | None = None,
    start: np.ndarray | None = None,
    threads: int | None = None,
) -> PageRankResult:
    """Single-process PageRank (personalized when ``personalization`` is given).

    ``threads``: kernel threads (default ``auto_threads()``). The result does not depend on it, bit for bit.
    Returns the vector normalised to sum 1, the number of iterations and the L1 residual of each.
    Raises ValueError on a bad ``alpha`` or personalization vector.
    """
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(threads or auto_threads(), numba.config.NUMBA_NUM_THREADS)))
    try:
        return _power_iteration(_Stepper(matrix), alpha, tol, max_iter, personalization, start)
    finally:
        numba.set_num_threads(previous)


def cheirank(matrix: LinkMatrix, **kwargs) -> PageRankResult:
    """CheiRank: the PageRank of the reversed graph (same α, tolerance, personalization)."""
    return pagerank(matrix.reversed(), **kwargs)


# ---------------------------------------------------------------------------------------------
# Distributed: one Ray task per row block and iteration, over the rank vector in the object store.


def _block_gather(indptr: np.ndarray, indices: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, str]:
    import ray

    numba.set_num_threads(1)  # the task holds one CPU: other blocks run on the other cores
    return gather_sum(indptr, indices, z), ray.get_runtime_context().get_node_id()


class _RayStepper(_Stepper):
    """Gathers with one Ray task per row block: blocks are ``ray.put`` once, ``z`` once per iteration."""

    def __init__(self, matrix: LinkMatrix, num_blocks: int) -> None:
        import ray

        super().__init__(matrix)
        self.ray = ray
        # SPREAD: blocks go to different nodes when there are several (the point of distributing).
        self.task = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(_block_gather)
        self.bounds = matrix.row_blocks(num_blocks)
        self.blocks = []
        for lo, hi in self.bounds:
            ip = matrix.pred_indptr[lo : hi + 1]
            local = ip - ip[0]
            self.blocks.append(
                (self.ray.put(local), self.ray.put(matrix.pred_indices[ip[0] : ip[-1]]))
            )
        self.acc = np.empty(matrix.num_nodes)
        self.task_seconds = 0.0
        self.nodes_used: set[str] = set()

    def step(self, z: np.ndarray, v: np.ndarray, alpha: float, spread: float, x: np.ndarray, y: np.ndarray) -> float:
        t0 = time.perf_counter()
        z_ref = self.ray.put(z)
        refs = [self.task.remote(ip, idx, z_ref) for ip, idx in self.blocks]
        for (lo, hi), (part, node) in zip(self.bounds, self.ray.get(refs), strict=True):
            self.acc[lo:hi] = part
            self.nodes_used.add(node)
        del z_ref
        self.task_seconds += time.perf_counter() - t0
        return _combine(self.acc, self._v(v), v[0], alpha, spread, x, y)


def distributed_pagerank(
    matrix: LinkMatrix,
    alpha: float = DEFAULT_ALPHA,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    personalization: np.ndarray | None = None,
    start: np.ndarray | None = None,
    num_blocks: int = 2,
) -> PageRankResult:
    """PageRank with the gather split into ``num_blocks`` row blocks, one Ray task each per iteration.

    Needs an initialised Ray. The vector equals ``pagerank(...)``'s bit for bit: each row is summed
    by the same kernel in the same order, and the rest of the step runs on the driver.
    """
    import ray

    if not ray.is_initialized():
        raise RuntimeError("distributed_pagerank needs ray.init() first")
    stepper = _RayStepper(matrix, num_blocks)
    result = _power_iteration(stepper, alpha, tol, max_iter, personalization, start)
    result.nodes_used = stepper.nodes_used
    return result
