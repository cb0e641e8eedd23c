"""Our numba codes against dsi-bitstream (the reference implementation of WebGraph's codes)."""

from __future__ import annotations

import dsi_bitstream
import numpy as np
from numba import njit

from raycrawl.storage import codes


@njit(cache=True)
def _read_mixed(words, kinds, count):
    out = np.empty(count, dtype=np.int64)
    pos = 0
    for i in range(count):
        if kinds[i] == 0:
            out[i], pos = codes.read_gamma(words, pos)
        elif kinds[i] == 1:
            out[i], pos = codes.read_zeta(words, pos, 3)
        else:
            out[i], pos = codes.read_unary(words, pos)
    return out, pos


@njit(cache=True)
def _write_mixed(values, kinds):
    buf = np.zeros(len(values) * 4 + codes.PAD_WORDS, dtype=np.uint64)
    pos = 0
    counted = 0
    empty = np.zeros(0, dtype=np.uint64)
    for i in range(len(values)):
        if kinds[i] == 0:
            pos = codes.write_gamma(buf, pos, values[i])
            counted = codes.write_gamma(empty, counted, values[i])
        elif kinds[i] == 1:
            pos = codes.write_zeta(buf, pos, values[i], 3)
            counted = codes.write_zeta(empty, counted, values[i], 3)
        else:
            pos = codes.write_unary(buf, pos, values[i])
            counted = codes.write_unary(empty, counted, values[i])
    return buf, pos, counted


def _sample(rng, n):
    # Mixed magnitudes: small gaps dominate in a graph, but huge ones must work too.
    exps = rng.integers(0, 40, size=n)
    values = (rng.random(n) * (2.0 ** exps)).astype(np.int64)
    kinds = rng.integers(0, 3, size=n)
    values[kinds == 2] %= 200  # unary only for small values
    return values, kinds


def test_dsi_writes_we_read(tmp_path):
    rng = np.random.default_rng(1)
    values, kinds = _sample(rng, 5000)
    w = dsi_bitstream.BitWriterBigEndian(str(tmp_path / "s.bin"))
    nbits = 0
    for v, k in zip(values.tolist(), kinds.tolist(), strict=True):
        if k == 0:
            nbits += w.write_gamma(v)
        elif k == 1:
            nbits += w.write_zeta(v, 3)
        else:
            nbits += w.write_unary(v)
    w.flush()
    words = codes.words_from_bytes((tmp_path / "s.bin").read_bytes())
    out, pos = _read_mixed(words, kinds, len(values))
    assert np.array_equal(out, values)
    assert pos == nbits


def test_we_write_dsi_reads(tmp_path):
    rng = np.random.default_rng(2)
    values, kinds = _sample(rng, 5000)
    buf, nbits, counted = _write_mixed(values, kinds)
    assert counted == nbits  # the counting-only writer agrees with the real one
    (tmp_path / "s.bin").write_bytes(codes.bytes_from_words(buf, nbits))
    r = dsi_bitstream.BitReaderBigEndian(str(tmp_path / "s.bin"))
    got = []
    for k in kinds.tolist():
        got.append(r.read_gamma() if k == 0 else r.read_zeta(3) if k == 1 else r.read_unary())
    assert got == values.tolist()
    assert r.bit_pos() == nbits
    # Lengths agree with dsi-bitstream's own length functions.
    for v in values[:200].tolist():
        assert codes.len_gamma(v) == dsi_bitstream.len_gamma(v)
        assert codes.len_zeta(v, 3) == dsi_bitstream.len_zeta(v, 3)


def test_gamma_sequence_round_trip():
    values = np.random.default_rng(3).integers(0, 1 << 30, size=1000)
    buf, nbits = codes.write_gamma_sequence(values)
    out, pos = codes.read_gamma_sequence(codes.words_from_bytes(codes.bytes_from_words(buf, nbits)), 1000)
    assert np.array_equal(out, values) and pos == nbits
