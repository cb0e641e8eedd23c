"""PageRank / CheiRank power iteration: against networkx, distributed == single, cnr-2000 ground truth."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from shared_data import CNR_2000

from raycrawl.tasks.pagerank import (
    LinkMatrix,
    cheirank,
    csr_from_edges,
    distributed_pagerank,
    pagerank,
    teleport_vector,
)

CNR = CNR_2000
REPO = Path(__file__).resolve().parents[1]


def random_graph(seed: int, n: int = 400, m: int = 1600, dangling_frac: float = 0.15):
    """A random digraph with self-loops, duplicate arcs and about ``dangling_frac`` dangling nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dangling = rng.choice(n, int(dangling_frac * n), replace=False)
    keep = ~np.isin(src, dangling)
    src, dst = src[keep], dst[keep]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    indptr, indices = csr_from_edges(src, dst, n)
    return g, LinkMatrix.from_successors(indptr, indices)


def nx_vector(d: dict, n: int) -> np.ndarray:
    return np.array([d[i] for i in range(n)])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.85, 0.5])
def test_pagerank_matches_networkx_with_dangling_nodes(seed, alpha):
    g, m = random_graph(seed)
    assert len(m.dangling) > 0
    ours = pagerank(m, alpha=alpha, tol=1e-13)
    ref = nx_vector(nx.pagerank(g, alpha=alpha, tol=1e-15, max_iter=10_000), m.num_nodes)
    assert ours.converged and ours.residuals[-1] < 1e-13
    assert np.abs(ours.vector - ref).sum() < 1e-8
    assert abs(ours.vector.sum() - 1.0) < 1e-12


def test_cheirank_is_pagerank_of_reversed_graph():
    g, m = random_graph(7)
    ours = cheirank(m, tol=1e-13)
    ref = nx_vector(nx.pagerank(g.reverse(copy=True), tol=1e-15, max_iter=10_000), m.num_nodes)
    assert np.abs(ours.vector - ref).sum() < 1e-8


def test_personalized_pagerank_matches_networkx():
    g, m = random_graph(3)
    rng = np.random.default_rng(11)
    p = np.zeros(m.num_nodes)
    seeds = rng.choice(m.num_nodes, 5, replace=False)
    p[seeds] = rng.random(5) + 0.1
    ours = pagerank(m, alpha=0.85, tol=1e-13, personalization=p)
    # networkx sends dangling mass along the personalization too (its default), as we do.
    ref = nx_vector(
        nx.pagerank(g, alpha=0.85, personalization={int(i): float(p[i]) for i in seeds}, tol=1e-15, max_iter=10_000),
        m.num_nodes,
    )
    assert np.abs(ours.vector - ref).sum() < 1e-8


def dense_s(m: LinkMatrix) -> np.ndarray:
    """The paper's S (α = 1, dangling columns 1/N) as a dense matrix, built from the successor lists."""
    n = m.num_nodes
    succ = m.reversed()
    s = np.zeros((n, n))
    for j in range(n):
        out = succ.pred_indices[succ.pred_indptr[j] : succ.pred_indptr[j + 1]]
        if len(out):
            s[out, j] = 1.0 / len(out)
        else:
            s[:, j] = 1.0 / n
    return s


def test_pagerank_fixed_point_of_google_matrix_dense():
    """Independent check: the vector is the λ=1 right eigenvector of the dense G of the paper's eq. (1)."""
    _, m = random_graph(5, n=120, m=400)
    n = m.num_nodes
    gm = 0.85 * dense_s(m) + 0.15 / n
    vals, vecs = np.linalg.eig(gm)
    top = np.argmax(vals.real)
    assert abs(vals[top] - 1.0) < 1e-10
    ref = np.abs(vecs[:, top].real)
    ref /= ref.sum()
    assert np.abs(pagerank(m, tol=1e-14).vector - ref).sum() < 1e-9


def test_bad_inputs_raise_clear_errors():
    _, m = random_graph(0, n=20, m=40)
    with pytest.raises(ValueError, match="alpha"):
        pagerank(m, alpha=1.5)
    with pytest.raises(ValueError, match="shape"):
        teleport_vector(20, np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        teleport_vector(20, -np.ones(20))
    with pytest.raises(ValueError, match="sums to 0"):
        teleport_vector(20, np.zeros(20))
    with pytest.raises(ValueError, match="out of range"):
        csr_from_edges(np.array([0]), np.array([5]), 3)


def test_not_converged_is_reported():
    _, m = random_graph(1)
    r = pagerank(m, tol=1e-300, max_iter=5)
    assert not r.converged and r.iterations == 5 and len(r.residuals) == 5


def test_row_blocks_cover_all_rows():
    _, m = random_graph(2)
    for k in (1, 2, 3, 7):
        b = m.row_blocks(k)
        assert b[0][0] == 0 and b[-1][1] == m.num_nodes
        assert all(hi == lo2 for (_, hi), (lo2, _) in zip(b[:-1], b[1:], strict=True))
        assert len(b) <= k


def test_thread_count_does_not_change_the_vector():
    _, m = random_graph(4, n=3000, m=15000)
    one = pagerank(m, tol=1e-12, threads=1)
    two = pagerank(m, tol=1e-12, threads=2)
    assert one.iterations == two.iterations and one.residuals == two.residuals
    assert np.array_equal(one.vector, two.vector)


def test_distributed_equals_single(ray_local):
    _, m = random_graph(4, n=3000, m=15000)
    p = np.random.default_rng(0).random(m.num_nodes)
    for pers in (None, p):
        single = pagerank(m, tol=1e-12, personalization=pers)
        dist = distributed_pagerank(m, tol=1e-12, personalization=pers, num_blocks=3)
        assert dist.iterations == single.iterations
        assert np.array_equal(dist.vector, single.vector)  # bit for bit, not just close


@pytest.mark.slow
def test_distributed_on_two_node_cluster(tmp_path):
    """A real 2-node Ray cluster (one CPU each): blocks run on both nodes and the vector is unchanged."""
    script = textwrap.dedent(
        """
        import numpy as np, ray
        from ray.cluster_utils import Cluster
        from tests.test_pagerank import random_graph
        from raycrawl.tasks.pagerank import distributed_pagerank, pagerank
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, "no_monitor": True})
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        try:
            _, m = random_graph(6, n=2000, m=10000)
            single = pagerank(m, tol=1e-12)
            dist = distributed_pagerank(m, tol=1e-12, num_blocks=2)
            assert np.array_equal(dist.vector, single.vector), "vectors differ"
            print("NODES", len(dist.nodes_used), "ITER", dist.iterations)
        finally:
            ray.shutdown()
            cluster.shutdown()
        """
    )
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "NODES 2" in proc.stdout, proc.stdout + proc.stderr[-2000:]


# The cnr-2000 ground truth (top PageRank 60597/60595 tie, 285152; top CheiRank 2132, 85777) is asserted
# end to end through the CLI in tests/test_rank.py::test_cli_cnr2000 (one graph decode for both).
