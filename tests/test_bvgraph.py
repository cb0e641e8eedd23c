"""BV graph reader on the LAW cnr-2000 graph: its transpose file is an independent ground truth."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from shared_data import CNR_2000

from raycrawl.errors import UserError
from raycrawl.storage.bvgraph import BVGraph

CNR = CNR_2000
needs_cnr = pytest.mark.skipif(not Path(str(CNR) + ".graph").exists(), reason="cnr-2000 not available")


@pytest.fixture(scope="module")
def cnr():
    return BVGraph.load(CNR)


@needs_cnr
def test_cnr_matches_its_transpose(cnr):
    g_t = BVGraph.load(str(CNR) + "-t")
    assert (cnr.num_nodes, cnr.num_arcs) == (325557, 3216152) == (g_t.num_nodes, g_t.num_arcs)
    indptr, indices = cnr.to_csr()
    tp, ti = g_t.to_csr()
    n = cnr.num_nodes
    a = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=(n, n))
    at = sp.csr_matrix(a.T)
    at.sort_indices()
    assert np.array_equal(at.indptr, tp) and np.array_equal(at.indices, ti)
    # Lists are strictly increasing (sorted, no multi-arcs), as BV requires.
    src = np.repeat(np.arange(n), np.diff(indptr))
    assert np.all((np.diff(indices) > 0) | (np.diff(src) > 0))


@needs_cnr
def test_random_access_equals_sequential(cnr):
    indptr, indices = cnr.to_csr()
    rng = np.random.default_rng(0)
    for v in rng.integers(0, cnr.num_nodes, size=3000).tolist() + [0, cnr.num_nodes - 1]:
        assert np.array_equal(cnr.successors(v), indices[indptr[v] : indptr[v + 1]])
        assert cnr.outdegree(v) == indptr[v + 1] - indptr[v]
    assert np.array_equal(cnr.outdegrees(), np.diff(indptr))
    first = [(v, s.tolist()) for v, s in zip(range(50), (s for _, s in cnr.iter_nodes()), strict=False)]
    assert first == [(v, indices[indptr[v] : indptr[v + 1]].tolist()) for v in range(50)]
    with pytest.raises(IndexError):
        cnr.successors(cnr.num_nodes)


@needs_cnr
def test_without_offsets_file(tmp_path, cnr):
    for ext in (".graph", ".properties"):
        shutil.copy(str(CNR) + ext, tmp_path / ("g" + ext))
    g = BVGraph.load(tmp_path / "g")
    assert np.array_equal(g.successors(1234), cnr.successors(1234))


@needs_cnr
def test_truncated_and_corrupt_files_are_user_errors(tmp_path):
    data = Path(str(CNR) + ".graph").read_bytes()
    for ext in (".offsets", ".properties"):
        shutil.copy(str(CNR) + ext, tmp_path / ("g" + ext))
    (tmp_path / "g.graph").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="past the end|truncated"):
        BVGraph.load(tmp_path / "g")
    (tmp_path / "g.offsets").unlink()
    g = BVGraph.load(tmp_path / "g")
    with pytest.raises(UserError):
        g.to_csr()
    # Garbage in the middle: decoding must stop with a clear error, not crash or return junk.
    bad = bytearray(data)
    bad[len(bad) // 3 : len(bad) // 3 + 4096] = b"\x00" * 4096
    (tmp_path / "g.graph").write_bytes(bytes(bad))
    with pytest.raises(UserError):
        BVGraph.load(tmp_path / "g").to_csr()
    with pytest.raises(UserError, match="cannot read"):
        BVGraph.load(tmp_path / "missing")
    (tmp_path / "p.properties").write_text("nodes=abc\n")
    with pytest.raises(UserError, match="nodes"):
        BVGraph.load(tmp_path / "p")
