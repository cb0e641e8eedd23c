"""Instantaneous codes on big-endian bit streams, compiled with numba for the BV hot loops.

The conventions are WebGraph's (``it.unimi.dsi.io.InputBitStream``), which are also those of
``dsi-bitstream`` (``BitReaderBigEndian``/``BitWriterBigEndian``), so streams written here read
there and vice versa (``tests/test_bvgraph_codes.py`` checks this against dsi-bitstream):

* bits are packed most-significant first; a stream is an array of ``uint64`` words whose
  big-endian byte image is the file;
* ``unary(n)``: ``n`` zeros then a one;
* ``gamma(n)``: ``x = n + 1``, ``unary(msb(x))`` then the ``msb(x)`` low bits of ``x``;
* ``zeta_k(n)``: ``x = n + 1``, ``h = msb(x) // k``, ``unary(h)``, then ``x - 2**(h*k)`` in
  minimal binary over ``[0, 2**((h+1)*k) - 2**(h*k))``;
* ``nat2int``/``int2nat``: the zig-zag map WebGraph uses for signed first gaps.

Readers take ``(words, pos)`` and return ``(value, new_pos)``; writers take
``(buf, pos, value)`` and return ``new_pos``. A writer called with ``buf`` of length 0 only
counts bits (used to cost alternative encodings without writing them).

A jitted caller passes a position or flag as a typed value (``np.int64(0)``, ``np.bool_(True)``),
not a literal: numba compiles a callee once per argument type, and ``pos = 0`` before a loop is
typed ``Literal[int](0)`` on the first pass, so each such call site compiled the whole callee a
second time (the kernels' tests from a cold cache: 101 → 72 CPU-s of compiling without them).

The readers are ``inline="always"`` though it costs compile time: as plain calls, sequential
decoding of cnr-2000 went from 12.0 to 16.1 ns/arc (benchmarks/graph.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

# Zero words appended after a stream so a read near the end never indexes past the array:
# one code reads at most 64 bits after its unary part, whose end is bounds-checked.
PAD_WORDS = 3

_U64_1 = np.uint64(1)
_U64_0 = np.uint64(0)


def words_from_bytes(data: bytes | np.ndarray) -> np.ndarray:
    """The ``uint64`` word image of a big-endian bit stream, padded with ``PAD_WORDS`` zeros."""
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    nwords = (len(raw) + 7) // 8 + PAD_WORDS
    padded = np.zeros(nwords * 8, dtype=np.uint8)
    padded[: len(raw)] = raw
    return padded.view(">u8").astype(np.uint64)


def bytes_from_words(words: np.ndarray, nbits: int, align: int = 8) -> bytes:
    """The file image of the first ``nbits`` bits of ``words``, zero-padded to ``align`` bytes."""
    nbytes = (nbits + 7) // 8
    nbytes = (nbytes + align - 1) // align * align
    return words.astype(">u8").tobytes()[:nbytes]


@njit(cache=True, inline="always")
def peek64(words, pos):
    """The 64 bits starting at bit ``pos``."""
    w = pos >> 6
    off = np.uint64(pos & 63)
    if off == 0:
        return words[w]
    return (words[w] << off) | (words[w + 1] >> (np.uint64(64) - off))


@njit(cache=True, inline="always")
def clz64(x):
    """Leading zeros of a non-zero uint64."""
    n = 0
    if x & np.uint64(0xFFFFFFFF00000000) == 0:
        n += 32
        x <<= np.uint64(32)
    if x & np.uint64(0xFFFF000000000000) == 0:
        n += 16
        x <<= np.uint64(16)
    if x & np.uint64(0xFF00000000000000) == 0:
        n += 8
        x <<= np.uint64(8)
    if x & np.uint64(0xF000000000000000) == 0:
        n += 4
        x <<= np.uint64(4)
    if x & np.uint64(0xC000000000000000) == 0:
        n += 2
        x <<= np.uint64(2)
    if x & np.uint64(0x8000000000000000) == 0:
        n += 1
    return n


@njit(cache=True)
def msb64(x):
    """Index of the most significant set bit of a positive int64."""
    return 63 - clz64(np.uint64(x))


@njit(cache=True, inline="always")
def read_bits(words, pos, n):
    """``n`` bits (0 ≤ n ≤ 63) as an unsigned integer."""
    if n == 0:
        return 0, pos
    v = peek64(words, pos) >> np.uint64(64 - n)
    return np.int64(v), pos + n


@njit(cache=True, inline="always")
def read_unary(words, pos):
    n = 0
    limit = (len(words) - 2) * 64
    while True:
        v = peek64(words, pos)
        if v != 0:
            z = clz64(v)
            return n + z, pos + z + 1
        n += 64
        pos += 64
        if pos >= limit:
            raise ValueError("bit stream truncated or corrupt (unary code runs past the end)")


@njit(cache=True, inline="always")
def read_gamma(words, pos):
    msb, pos = read_unary(words, pos)
    if msb == 0:
        return 0, pos
    if msb > 62:
        raise ValueError("bit stream corrupt (gamma code too long)")
    low, pos = read_bits(words, pos, msb)
    return ((1 << msb) | low) - 1, pos


@njit(cache=True, inline="always")
def read_zeta(words, pos, k):
    h, pos = read_unary(words, pos)
    hk = h * k
    if hk + k > 62:
        raise ValueError("bit stream corrupt (zeta code too long)")
    left = 1 << hk
    m, pos = read_bits(words, pos, hk + k - 1)
    if m < left:
        return m + left - 1, pos
    b, pos = read_bits(words, pos, 1)
    return ((m << 1) | b) - 1, pos


@njit(cache=True, inline="always")
def read_unary_within(words, pos, limit):
    """(value, new_pos); value −1 when the run of zeros passes ``limit`` (corrupt stream)."""
    z = 0
    while True:
        if pos >= limit:
            return -1, pos
        x = peek64(words, pos)
        if x != 0:
            lz = np.int64(leading_zeros(x))
            return z + lz, pos + lz + 1
        z += 64
        pos += 64


@njit(cache=True, inline="always")
def read_code_within(words, pos, kind, k, limit):
    """One 0-based code at ``pos``, ``kind`` 0 γ, 1 δ, 2 ζ``k``, 3 unary → (value, new_pos): the
    checked readers of the summaries' streams, which stop at ``limit`` (a record's end, not the
    stream's) and answer −1 for a corrupt code instead of raising inside the decoding loop."""
    if kind == 3:
        return read_unary_within(words, pos, limit)
    if kind == 0 or kind == 1:
        z, pos = read_unary_within(words, pos, limit)
        if z < 0 or z > 62:
            return -1, pos
        if kind == 1:
            n = (np.int64(1) << z) | read_bits(words, pos, z)[0]
            pos += z
            z = n - 1
            if z > 62:
                return -1, pos
        v = ((np.int64(1) << z) | read_bits(words, pos, z)[0]) - 1
        return v, pos + z
    h, pos = read_unary_within(words, pos, limit)
    if h < 0 or (h + 1) * k > 62:
        return -1, pos
    lo = np.int64(1) << (h * k)
    hi = np.int64(1) << ((h + 1) * k)
    mx = hi - lo
    lg = 63 - np.int64(leading_zeros(np.uint64(mx)))
    prefix = read_bits(words, pos, lg)[0]
    pos += lg
    limit_mb = (np.int64(1) << (lg + 1)) - mx
    if prefix >= limit_mb:
        prefix = (prefix << 1) | read_bits(words, pos, 1)[0]
        pos += 1
        prefix -= limit_mb
    return lo + prefix - 1, pos


@njit(cache=True, inline="always")
def nat2int(x):
    return x >> 1 if x & 1 == 0 else -((x + 1) >> 1)


@njit(cache=True)
def int2nat(x):
    return 2 * x if x >= 0 else -2 * x - 1


@njit(cache=True)
def write_bits(buf, pos, value, n):
    """Write the ``n`` (0 ≤ n ≤ 63) low bits of ``value``."""
    if n == 0 or len(buf) == 0:
        return pos + n
    v = np.uint64(value) & ((_U64_1 << np.uint64(n)) - _U64_1)
    w = pos >> 6
    free = 64 - (pos & 63)
    if n <= free:
        buf[w] |= v << np.uint64(free - n)
    else:
        rest = n - free
        buf[w] |= v >> np.uint64(rest)
        buf[w + 1] |= v << np.uint64(64 - rest)
    return pos + n


@njit(cache=True)
def write_unary(buf, pos, n):
    # Zeros are already in the (zero-initialised) buffer: only the final one is set.
    pos += n
    return write_bits(buf, pos, 1, 1)


@njit(cache=True)
def len_gamma(n):
    return 2 * msb64(n + 1) + 1


@njit(cache=True)
def write_gamma(buf, pos, n):
    x = n + 1
    msb = msb64(x)
    pos = write_unary(buf, pos, msb)
    return write_bits(buf, pos, x, msb)


@njit(cache=True)
def len_zeta(n, k):
    x = n + 1
    h = msb64(x) // k
    hk = h * k
    left = 1 << hk
    return h + 1 + (hk + k - 1 if x - left < left else hk + k)


@njit(cache=True)
def write_zeta(buf, pos, n, k):
    x = n + 1
    h = msb64(x) // k
    hk = h * k
    pos = write_unary(buf, pos, h)
    left = 1 << hk
    if x - left < left:
        return write_bits(buf, pos, x - left, hk + k - 1)
    return write_bits(buf, pos, x, hk + k)


@njit(cache=True)
def read_gamma_sequence(words, count):
    """``count`` γ-coded naturals from the start of the stream (e.g. a ``.offsets`` file)."""
    out = np.empty(count, dtype=np.int64)
    pos = np.int64(0)
    for i in range(count):
        out[i], pos = read_gamma(words, pos)
    return out, pos


@njit(cache=True)
def write_gamma_sequence(values):
    """A γ-coded stream of ``values``; returns ``(words, nbits)``."""
    nbits = 0
    for v in values:
        nbits += len_gamma(v)
    buf = np.zeros(nbits // 64 + PAD_WORDS, dtype=np.uint64)
    pos = np.int64(0)
    for v in values:
        pos = write_gamma(buf, pos, v)
    return buf, pos
