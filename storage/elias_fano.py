"""Elias–Fano representation of monotone sequences, with select and rank (seed 000, §2).

A non-decreasing sequence x_0 ≤ … ≤ x_{n-1} ≤ u is split into ``low_bits = ⌊log2(u/n)⌋`` lower bits per
element, stored verbatim, and the upper bits, stored in unary as a bit vector in which element i
sets bit ``(x_i >> low_bits) + i``. That costs at most ``2 + ⌈log2(u/n)⌉`` bits per element — close to the
information-theoretic minimum — and gives constant-time access through sampled positions of the
ones (``select``) and of the zeros (``rank``), an inventory of one 64-bit word per ``QUANTUM``
ones (or zeros), i.e. 0.25 extra bits per element.

The archive of summaries uses one such list for the bit offsets of its summaries (random access)
and one as a *set* of the graph nodes missing from the archive (ranking a document id in it gives
the number of missing documents before it).

File layout (``.ef``), all little-endian: the 8-byte magic ``RCEF0001``; seven ``uint64``
— n, u, low_bits, and the word counts of lower, upper, ones inventory, zeros inventory; then those four
``uint64`` arrays in that order. Bits are numbered LSB-first inside each word.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numba
import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"RCEF0001"
QUANTUM = 256  # ones (zeros) between two inventory samples
_HEADER = struct.Struct("<8s7Q")

# Byte tables shared by the in-word select: popcount and position of the k-th one of each byte.
_POP8 = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)
_SEL8 = np.full((256, 8), 8, dtype=np.int64)
for _b in range(256):
    _ones = [i for i in range(8) if _b >> i & 1]
    _SEL8[_b, : len(_ones)] = _ones
del _b, _ones


class EliasFanoError(ValueError):
    """A malformed or truncated ``.ef`` file."""


@numba.njit(cache=True)
def _popcount(w):
    w = w - ((w >> np.uint64(1)) & np.uint64(0x5555555555555555))
    w = (w & np.uint64(0x3333333333333333)) + ((w >> np.uint64(2)) & np.uint64(0x3333333333333333))
    w = (w + (w >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((w * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True)
def _select_in_word(w, r, pop8, sel8):
    """Position (0..63) of the r-th (0-based) one of ``w``; the caller guarantees it exists."""
    for byte in range(8):
        b = np.int64((w >> np.uint64(8 * byte)) & np.uint64(0xFF))
        c = pop8[b]
        if r < c:
            return 8 * byte + sel8[b, r]
        r -= c
    return -1


@numba.njit(cache=True)
def _build(values, low_bits, lower, upper):
    n = values.shape[0]
    mask = (np.int64(1) << low_bits) - 1
    for i in range(n):
        v = values[i]
        if low_bits > 0:
            low = np.uint64(v & mask)
            pos = i * low_bits
            w = pos >> 6
            o = pos & 63
            lower[w] |= low << np.uint64(o)
            if o + low_bits > 64:
                lower[w + 1] |= low >> np.uint64(64 - o)
        hp = (v >> low_bits) + i
        upper[hp >> 6] |= np.uint64(1) << np.uint64(hp & 63)


@numba.njit(cache=True)
def _inventory(upper, nbits, want_ones, quantum):
    """Positions of the 0th, quantum-th, 2·quantum-th … one (or zero) of the first nbits bits."""
    out = np.empty(nbits // quantum + 2, dtype=np.uint64)
    k = 0
    seen = 0
    for p in range(nbits):
        bit = (upper[p >> 6] >> np.uint64(p & 63)) & np.uint64(1)
        if (bit == 1) == want_ones:
            if seen % quantum == 0:
                out[k] = p
                k += 1
            seen += 1
    return out[:k]


@numba.njit(cache=True)
def _lower_bits(lower, low_bits, i):
    if low_bits == 0:
        return np.int64(0)
    pos = i * low_bits
    w = pos >> 6
    o = pos & 63
    x = lower[w] >> np.uint64(o)
    if o + low_bits > 64:
        x |= lower[w + 1] << np.uint64(64 - o)
    return np.int64(x & ((np.uint64(1) << np.uint64(low_bits)) - np.uint64(1)))


@numba.njit(cache=True)
def _select(upper, inv, quantum, r, want_ones, pop8, sel8):
    """Position of the r-th one (or zero) of ``upper``, starting from the inventory sample."""
    p = np.int64(inv[r // quantum])
    r -= (r // quantum) * quantum
    w = p >> 6
    word = upper[w] if want_ones else ~upper[w]
    word &= ~np.uint64(0) << np.uint64(p & 63)
    while True:
        c = _popcount(word)
        if r < c:
            return (w << 6) + _select_in_word(word, r, pop8, sel8)
        r -= c
        w += 1
        word = upper[w] if want_ones else ~upper[w]


@numba.njit(cache=True)
def _get(lower, upper, inv1, low_bits, quantum, i, pop8, sel8):
    high = _select(upper, inv1, quantum, i, True, pop8, sel8) - i
    return (high << low_bits) | _lower_bits(lower, low_bits, i)


@numba.njit(cache=True)
def _get_many(lower, upper, inv1, low_bits, quantum, idx, pop8, sel8):
    out = np.empty(idx.shape[0], dtype=np.int64)
    for j in range(idx.shape[0]):
        out[j] = _get(lower, upper, inv1, low_bits, quantum, idx[j], pop8, sel8)
    return out


@numba.njit(cache=True)
def _decode_all(lower, upper, low_bits, n):
    out = np.empty(n, dtype=np.int64)
    i = 0
    p = 0
    while i < n:
        if (upper[p >> 6] >> np.uint64(p & 63)) & np.uint64(1):
            out[i] = ((p - i) << low_bits) | _lower_bits(lower, low_bits, i)
            i += 1
        p += 1
    return out


@numba.njit(cache=True)
def _rank(lower, upper, inv0, low_bits, quantum, n, u, x, pop8, sel8):
    """Number of elements strictly smaller than x."""
    if x > u:
        return n
    if x <= 0:
        return 0
    hx = x >> low_bits
    if hx == 0:
        pos = 0
    else:
        pos = _select(upper, inv0, quantum, hx - 1, False, pop8, sel8) + 1
    cnt = pos - hx  # ones before the hx-th zero = elements whose high part is < hx
    while cnt < n and (upper[pos >> 6] >> np.uint64(pos & 63)) & np.uint64(1):
        if ((hx << low_bits) | _lower_bits(lower, low_bits, cnt)) >= x:
            break
        cnt += 1
        pos += 1
    return cnt


class EliasFano:
    """An immutable non-decreasing sequence of non-negative integers with select and rank.

    ``ef[i]`` (select) is the i-th element; ``ef.rank(x)`` the number of elements < x;
    ``x in ef`` membership. Both are O(1) on average (inventory + a short in-word scan).
    """

    def __init__(self, n: int, u: int, low_bits: int, lower: np.ndarray, upper: np.ndarray,
                 inv1: np.ndarray, inv0: np.ndarray) -> None:
        self.n, self.u, self.low_bits = int(n), int(u), int(low_bits)
        self.lower, self.upper, self.inv1, self.inv0 = lower, upper, inv1, inv0

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_values(cls, values, universe: int | None = None) -> EliasFano:
        """Build from a non-decreasing sequence of non-negative ints; ``universe`` ≥ its maximum."""
        v = np.ascontiguousarray(values, dtype=np.int64)
        n = int(v.shape[0])
        if n and (v[0] < 0 or np.any(np.diff(v) < 0)):
            raise ValueError("Elias–Fano needs a non-decreasing sequence of non-negative integers")
        u = int(universe if universe is not None else (v[-1] if n else 0))
        if n and u < int(v[-1]):
            raise ValueError(f"universe {u} is smaller than the largest element {int(v[-1])}")
        low_bits = max(0, (u // n).bit_length() - 1) if n else 0
        lower = np.zeros((n * low_bits + 63) // 64 + 1, dtype=np.uint64)
        upper_bits = n + (u >> low_bits) + 1
        # One spare word so the select scan can always read the word after the last one.
        upper = np.zeros((upper_bits + 63) // 64 + 1, dtype=np.uint64)
        if n:
            _build(v, low_bits, lower, upper)
        inv1 = _inventory(upper, upper_bits, True, QUANTUM)
        inv0 = _inventory(upper, upper_bits, False, QUANTUM)
        ef = cls(n, u, low_bits, lower, upper, inv1, inv0)
        return ef

    # -- access --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        """The i-th element (0-based; negative indices count from the end)."""
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"index {i} out of range for {self.n} elements")
        return int(_get(self.lower, self.upper, self.inv1, self.low_bits, QUANTUM, i, _POP8, _SEL8))

    def get_many(self, idx) -> np.ndarray:
        """Elements at the given indices (vectorised select)."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise IndexError("index out of range")
        return _get_many(self.lower, self.upper, self.inv1, self.low_bits, QUANTUM, idx, _POP8, _SEL8)

    def rank(self, x: int) -> int:
        """Number of elements strictly smaller than ``x``."""
        return int(_rank(self.lower, self.upper, self.inv0, self.low_bits, QUANTUM, self.n, self.u, int(x),
                         _POP8, _SEL8))

    def __contains__(self, x: int) -> bool:
        r = self.rank(x)
        return r < self.n and self[r] == x

    def to_array(self) -> np.ndarray:
        """All elements, decoded sequentially."""
        return _decode_all(self.lower, self.upper, self.low_bits, self.n)

    @property
    def bits(self) -> int:
        """Bits of the representation proper (lower + upper bits, inventories excluded)."""
        return self.n * self.low_bits + self.n + (self.u >> self.low_bits) + 1

    @property
    def bits_with_inventory(self) -> int:
        """Bits actually held in memory: the representation plus both inventories."""
        return self.bits + 64 * (len(self.inv1) + len(self.inv0))

    # -- files ---------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        with open(path, "wb") as f:
            f.write(_HEADER.pack(MAGIC, self.n, self.u, self.low_bits, len(self.lower), len(self.upper),
                                 len(self.inv1), len(self.inv0)))
            for a in (self.lower, self.upper, self.inv1, self.inv0):
                f.write(np.ascontiguousarray(a, dtype="<u8").tobytes())

    @classmethod
    def load(cls, path: str | Path) -> EliasFano:
        """Read a ``.ef`` file; raises :class:`EliasFanoError` if it is malformed or truncated."""
        data = Path(path).read_bytes()
        if len(data) < _HEADER.size:
            raise EliasFanoError(f"{path}: truncated Elias–Fano file ({len(data)} bytes)")
        magic, n, u, low_bits, nl, nu, n1, n0 = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise EliasFanoError(f"{path}: not an Elias–Fano file (bad magic {magic!r})")
        if low_bits > 62 or nl != (n * low_bits + 63) // 64 + 1 or nu != (n + (u >> low_bits) + 1 + 63) // 64 + 1:
            raise EliasFanoError(f"{path}: inconsistent Elias–Fano header")
        expected = _HEADER.size + 8 * (nl + nu + n1 + n0)
        if len(data) != expected:
            raise EliasFanoError(f"{path}: size {len(data)} bytes, header says {expected} (truncated?)")
        arrays = np.frombuffer(data, dtype="<u8", offset=_HEADER.size).astype(np.uint64)
        lower, upper = arrays[:nl], arrays[nl : nl + nu]
        inv1, inv0 = arrays[nl + nu : nl + nu + n1], arrays[nl + nu + n1 :]
        ef = cls(n, u, low_bits, lower, upper, inv1, inv0)
        if n1 != (n + QUANTUM - 1) // QUANTUM:
            raise EliasFanoError(f"{path}: inconsistent Elias–Fano inventory")
        return ef
