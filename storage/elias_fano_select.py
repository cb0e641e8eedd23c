"""The compiled select and rank of :class:`raycrawl.storage.elias_fano.EliasFano` (numba).

A module of its own so that building and saving a list imports no numba, which only reading needs:
the archive of summaries writes two (numba's import and first dispatch cost ~0.7 CPU-s a process,
measured).
"""

from __future__ import annotations

import numba
import numpy as np

# Byte tables shared by the in-word select: popcount and position of the k-th one of each byte.
POP8 = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)
SEL8 = np.full((256, 8), 8, dtype=np.int64)
for _b in range(256):
    _ones = [i for i in range(8) if _b >> i & 1]
    SEL8[_b, : len(_ones)] = _ones
del _b, _ones


@numba.njit(cache=True)
def popcount(w):
    w = w - ((w >> np.uint64(1)) & np.uint64(0x5555555555555555))
    w = (w & np.uint64(0x3333333333333333)) + ((w >> np.uint64(2)) & np.uint64(0x3333333333333333))
    w = (w + (w >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((w * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True)
def select_in_word(w, r, pop8, sel8):
    """Position (0..63) of the r-th (0-based) one of ``w``; the caller guarantees it exists."""
    for byte in range(8):
        b = np.int64((w >> np.uint64(8 * byte)) & np.uint64(0xFF))
        c = pop8[b]
        if r < c:
            return 8 * byte + sel8[b, r]
        r -= c
    return -1


@numba.njit(cache=True)
def lower_bits(lower, low_bits, i):
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
def select(upper, inv, quantum, r, want_ones, pop8, sel8):
    """Position of the r-th one (or zero) of ``upper``, starting from the inventory sample."""
    p = np.int64(inv[r // quantum])
    r -= (r // quantum) * quantum
    w = p >> 6
    word = upper[w] if want_ones else ~upper[w]
    word &= ~np.uint64(0) << np.uint64(p & 63)
    while True:
        c = popcount(word)
        if r < c:
            return (w << 6) + select_in_word(word, r, pop8, sel8)
        r -= c
        w += 1
        word = upper[w] if want_ones else ~upper[w]


@numba.njit(cache=True)
def get(lower, upper, inv1, low_bits, quantum, i, pop8, sel8):
    high = select(upper, inv1, quantum, i, True, pop8, sel8) - i
    return (high << low_bits) | lower_bits(lower, low_bits, i)


@numba.njit(cache=True)
def get_many(lower, upper, inv1, low_bits, quantum, idx, pop8, sel8):
    out = np.empty(idx.shape[0], dtype=np.int64)
    for j in range(idx.shape[0]):
        out[j] = get(lower, upper, inv1, low_bits, quantum, idx[j], pop8, sel8)
    return out


@numba.njit(cache=True)
def decode_all(lower, upper, low_bits, n):
    out = np.empty(n, dtype=np.int64)
    i = 0
    p = 0
    while i < n:
        if (upper[p >> 6] >> np.uint64(p & 63)) & np.uint64(1):
            out[i] = ((p - i) << low_bits) | lower_bits(lower, low_bits, i)
            i += 1
        p += 1
    return out


@numba.njit(cache=True)
def rank(lower, upper, inv0, low_bits, quantum, n, u, x, pop8, sel8):
    """Number of elements strictly smaller than x."""
    if x > u:
        return n
    if x <= 0:
        return 0
    hx = x >> low_bits
    if hx == 0:
        pos = 0
    else:
        pos = select(upper, inv0, quantum, hx - 1, False, pop8, sel8) + 1
    cnt = pos - hx  # ones before the hx-th zero = elements whose high part is < hx
    while cnt < n and (upper[pos >> 6] >> np.uint64(pos & 63)) & np.uint64(1):
        if ((hx << low_bits) | lower_bits(lower, low_bits, cnt)) >= x:
            break
        cnt += 1
        pos += 1
    return cnt
