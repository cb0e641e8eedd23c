"""Elias–Fano lists: select/rank against numpy on random sequences; malformed files."""

from __future__ import annotations

import numpy as np
import pytest

from raycrawl.storage.elias_fano import EliasFano, EliasFanoError


@pytest.mark.parametrize(("n", "u"), [(0, 0), (1, 0), (1, 7), (17, 17), (1000, 10**6), (5000, 10**12),
                                      (3000, 40), (70000, 70000 * 900)])
def test_select_rank_match_numpy(n, u, tmp_path):
    rng = np.random.default_rng(n * 31 + u % 997)
    v = np.sort(rng.integers(0, u + 1, n))
    ef = EliasFano.from_values(v, u)
    assert len(ef) == n
    assert np.array_equal(ef.to_array(), v)
    if n:
        idx = rng.integers(0, n, 2000)
        assert np.array_equal(ef.get_many(idx), v[idx])
        assert [ef[int(i)] for i in idx[:200]] == v[idx[:200]].tolist()
        assert ef[-1] == v[-1]
    probes = np.concatenate([rng.integers(-3, u + 4, 2000), v[:100], v[:100] + 1, [0, u, u + 1]])
    assert [ef.rank(int(x)) for x in probes] == np.searchsorted(v, probes, "left").tolist()
    present = set(v.tolist())
    assert all((int(x) in ef) == (int(x) in present) for x in probes[:500])
    # Space: within the Elias–Fano bound 2 + ⌈log2(u/n)⌉ bits per element.
    if n:
        assert ef.bits <= n * (2 + int(np.ceil(np.log2(max(u / n, 1))))) + 1
    ef.save(tmp_path / "x.ef")
    back = EliasFano.load(tmp_path / "x.ef")
    assert np.array_equal(back.to_array(), v)


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        EliasFano.from_values([3, 2])
    with pytest.raises(ValueError):
        EliasFano.from_values([1, 5], universe=4)
    with pytest.raises(IndexError):
        EliasFano.from_values([1, 2])[2]


def test_malformed_files(tmp_path):
    ef = EliasFano.from_values(np.arange(0, 10000, 7))
    path = tmp_path / "a.ef"
    ef.save(path)
    data = path.read_bytes()
    for bad in (data[:20], data[:-8], b"XXXXXXXX" + data[8:], b""):
        (tmp_path / "b.ef").write_bytes(bad)
        with pytest.raises(EliasFanoError):
            EliasFano.load(tmp_path / "b.ef")
