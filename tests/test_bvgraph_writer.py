"""BV writer: exact round trips, and byte-identity with WebGraph's own cnr-2000 file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shared_data import CNR_2000

from raycrawl.storage.bvgraph import BVGraph, csr_from_arcs, store, transpose_csr

CNR = str(CNR_2000)


def _random_graph(rng, n, m):
    """Web-like: mostly local arcs (so references and intervals occur), some long ones,
    self loops, runs of consecutive successors, copied lists, and empty nodes."""
    src = rng.integers(0, n, size=m)
    local = src + rng.integers(-20, 20, size=m)
    far = rng.integers(0, n, size=m)
    dst = np.where(rng.random(m) < 0.7, np.clip(local, 0, n - 1), far)
    extra_s, extra_d = [], []
    for _ in range(max(1, n // 50)):  # long intervals
        s = int(rng.integers(0, n))
        a = int(rng.integers(0, n))
        b = min(n, a + int(rng.integers(4, 200)))
        extra_s += [s] * (b - a)
        extra_d += list(range(a, b))
    for s in rng.integers(1, n, size=n // 10):  # copies of the previous list
        extra_s.append(int(s))
        extra_d.append(int(s))
    src = np.concatenate([src, extra_s, np.arange(0, n, 7)])
    dst = np.concatenate([dst, extra_d, np.arange(0, n, 7)])  # self loops
    keep = (src % 13) != 5  # some nodes have no successors at all
    return csr_from_arcs(n, src[keep], dst[keep])


@pytest.mark.parametrize("params", [
    {}, {"window": 0}, {"min_interval": 0}, {"max_ref_count": 1}, {"window": 3, "zeta_k": 2, "min_interval": 2},
])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_round_trip(tmp_path, seed, params):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 3000))
    indptr, indices = _random_graph(rng, n, n * 8)
    props = store(tmp_path / "g", indptr, indices, **params)
    g = BVGraph.load(tmp_path / "g")
    assert (g.num_nodes, g.num_arcs) == (n, len(indices)) == (props["nodes"], props["arcs"])
    ip, ix = g.to_csr()
    assert np.array_equal(ip, indptr) and np.array_equal(ix, indices)
    for v in rng.integers(0, n, size=200):
        assert np.array_equal(g.successors(int(v)), indices[indptr[v] : indptr[v + 1]])
    # The reference chain bound holds: random access never needs more than maxrefcount hops.
    assert props["copiedarcs"] + props["intervalisedarcs"] + props["residualarcs"] == len(indices)
    if "min_interval" not in params:
        assert props["intervalisedarcs"] > 0
    if "window" not in params:
        assert props["copiedarcs"] > 0


def test_edge_cases(tmp_path):
    for n, arcs in [(0, []), (1, []), (1, [(0, 0)]), (5, []), (3, [(2, 0), (2, 1), (2, 2)]),
                    (100, [(0, j) for j in range(100)] + [(99, j) for j in range(100)])]:
        s = np.array([a for a, _ in arcs], dtype=np.int64)
        d = np.array([b for _, b in arcs], dtype=np.int64)
        indptr, indices = csr_from_arcs(n, s, d)
        store(tmp_path / "e", indptr, indices)
        g = BVGraph.load(tmp_path / "e")
        ip, ix = g.to_csr()
        assert np.array_equal(ip, indptr) and np.array_equal(ix, indices)
        assert sorted(zip(*[a.tolist() for a in g.arcs()], strict=True)) == sorted(set(arcs))


def test_unsorted_input_rejected(tmp_path):
    with pytest.raises(ValueError):
        store(tmp_path / "x", np.array([0, 2]), np.array([0, 0]))
    with pytest.raises(ValueError):
        csr_from_arcs(2, np.array([0]), np.array([2]))


def test_transpose():
    rng = np.random.default_rng(5)
    indptr, indices = _random_graph(rng, 500, 3000)
    tp, ti = transpose_csr(500, indptr, indices)
    fwd = {(s, d) for s in range(500) for d in indices[indptr[s] : indptr[s + 1]].tolist()}
    back = {(s, d) for d in range(500) for s in ti[tp[d] : tp[d + 1]].tolist()}
    assert fwd == back
    tt = transpose_csr(500, tp, ti)
    assert np.array_equal(tt[0], indptr) and np.array_equal(tt[1], indices)


@pytest.mark.skipif(not Path(CNR + ".graph").exists(), reason="cnr-2000 not available")
@pytest.mark.parametrize("name", ["cnr-2000", "cnr-2000-t"])
def test_cnr_recompressed_is_byte_identical_to_webgraph(tmp_path, name):
    """Same parameters as LAW's file => WebGraph's exact choices, hence the same bytes."""
    src = BVGraph.load(f"{CNR_2000.parent}/{name}")
    indptr, indices = src.to_csr()
    props = store(tmp_path / name, indptr, indices, window=src.window, max_ref_count=src.max_ref_count,
                  min_interval=src.min_interval, zeta_k=src.zeta_k)
    assert props["bitsperlink"] == src.properties["bitsperlink"]
    for ext in (".graph", ".offsets"):
        ours_b = (tmp_path / f"{name}{ext}").read_bytes()
        law_b = Path(f"{CNR_2000.parent}/{name}{ext}").read_bytes()
        # LAW's files carry a few zero bytes of padding after the last record.
        assert ours_b == law_b[: len(ours_b)] and law_b[len(ours_b) :].strip(b"\0") == b""
    ours = BVGraph.load(tmp_path / name)
    ip, ix = ours.to_csr()
    assert np.array_equal(ip, indptr) and np.array_equal(ix, indices)
    for v in range(0, src.num_nodes, 1009):
        assert np.array_equal(ours.successors(v), src.successors(v))
