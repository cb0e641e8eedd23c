"""``storage.webgraph_ef``: the ``.ef`` files we write open in webgraph-rs (through the
``webgraph`` PyPI package) and give back exactly our graphs."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import webgraph
from shared_data import CNR_2000

from raycrawl.storage import bvgraph, webgraph_ef
from raycrawl.storage.bvgraph import BVGraph


def assert_same_graph(basename: str, indptr: np.ndarray, indices: np.ndarray) -> None:
    """webgraph-rs's view of ``basename`` (through its ``.ef``) equals the CSR ``indptr/indices``."""
    g = webgraph.BvGraph(basename)
    n = len(indptr) - 1
    assert g.num_nodes() == n
    assert g.num_arcs() == int(indptr[-1])
    degrees = np.diff(indptr)
    if n:
        assert np.array_equal(g.outdegrees(), degrees)
    for v in range(n):
        # successors(v) starts at the offset the Elias–Fano select gives for v.
        assert g.outdegree(v) == degrees[v], v
        assert list(g.successors(v)) == indices[indptr[v] : indptr[v + 1]].tolist(), v


@pytest.mark.parametrize(("seed", "n", "arcs_per_node"), [
    (0, 1, 0), (1, 1, 1), (2, 2, 1), (3, 50, 5), (4, 300, 1), (5, 3000, 8), (6, 5000, 0.3),
])
def test_random_graphs_open_in_webgraph(tmp_path, seed, n, arcs_per_node):
    rng = np.random.default_rng(seed)
    m = int(n * arcs_per_node)
    # Mix local and random arcs so records use references, intervals and residuals.
    src = rng.integers(0, n, m)
    dst = np.where(rng.random(m) < 0.5, (src + rng.integers(-3, 4, m)) % n, rng.integers(0, n, m))
    indptr, indices = bvgraph.csr_from_arcs(n, src, dst)
    base = str(tmp_path / "g")
    bvgraph.store(base, indptr, indices)  # writes g.ef too
    assert (tmp_path / "g.ef").exists()
    assert_same_graph(base, indptr, indices)


def test_empty_graph(tmp_path):
    base = str(tmp_path / "empty")
    bvgraph.store(base, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    g = webgraph.BvGraph(base)
    assert (g.num_nodes(), g.num_arcs()) == (0, 0)


def test_sparse_inventory_block(tmp_path):
    """One huge record among tiny ones: the select inventory block spanning it is longer than
    2**16 bits, so it takes the u32 sub-inventory format (with spill)."""
    rng = np.random.default_rng(7)
    n = 100_000
    dst = np.sort(rng.choice(n, 50_000, replace=False))
    indptr, indices = bvgraph.csr_from_arcs(n, np.zeros(len(dst), dtype=np.int64), dst)
    base = str(tmp_path / "hub")
    bvgraph.store(base, indptr, indices)
    offsets, graph_bits = webgraph_ef.graph_offsets(base)
    _, _, _, high_len, pos = webgraph_ef.ef_parts(offsets, graph_bits)
    inventory, spill = webgraph_ef.select_inventory(pos, high_len)
    flags = inventory[:-1 : webgraph_ef.WORDS_PER_INVENTORY] >> np.uint64(62)
    assert 2 in flags.tolist() and len(spill) > 0
    assert_same_graph(base, indptr, indices)


def test_ef_parts_decode_back():
    """The low/high bits decode to the values (independently of webgraph)."""
    rng = np.random.default_rng(3)
    values = np.cumsum(rng.integers(0, 1000, 5000))
    u = int(values[-1]) + 17
    lw, low, high, high_len, pos = webgraph_ef.ef_parts(values, u)
    assert lw == (u // len(values)).bit_length() - 1
    bits = np.unpackbits(high.view(np.uint8), bitorder="little")[:high_len]
    ones = np.flatnonzero(bits)
    assert np.array_equal(ones, pos)
    lowbits = np.unpackbits(low.view(np.uint8), bitorder="little")
    fields = lowbits[: len(values) * lw].reshape(-1, lw) @ (1 << np.arange(lw))
    assert np.array_equal(((ones - np.arange(len(values))) << lw) | fields, values)


def test_cnr_2000(tmp_path):
    """The LAW graph: every node's successors through webgraph-rs equal ours."""
    base = str(tmp_path / "cnr-2000")
    for ext in ("graph", "offsets", "properties"):
        shutil.copy(f"{CNR_2000}.{ext}", f"{base}.{ext}")
    webgraph_ef.write_ef(base)
    ours = BVGraph.load(base)
    indptr, indices = ours.to_csr()
    assert (ours.num_nodes, ours.num_arcs) == (325_557, 3_216_152)
    assert_same_graph(base, indptr, indices)
