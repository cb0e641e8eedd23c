"""The numba decoder of the archive of summaries (storage/summaries.py has the format).

A module of its own so that building an archive (``raycrawl summaries build``,
``SummaryWriter.finish``) imports no numba, which only reading needs: numba's import and first
dispatch cost ~0.7 CPU-s a process (measured). The readers are ``inline="always"``: as plain calls, sequential decoding was
12 % slower (benchmarks/summaries.py's archive, 50k summaries).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from raycrawl.storage.codes import peek64  # the stream is codes.py's word image (words_from_bytes)


@numba.njit(cache=True, inline="always")
def _bits(words, pos, n):
    if n == 0:
        return np.int64(0)
    return np.int64(peek64(words, pos) >> np.uint64(64 - n))


@numba.njit(cache=True, inline="always")
def _unary(words, pos, limit):
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


@numba.njit(cache=True, inline="always")
def _read(words, pos, kind, k, limit):
    """One 0-based code (γ, δ, ζk or unary) at ``pos`` → (value, new_pos); −1 value on corruption."""
    if kind == 3:
        return _unary(words, pos, limit)
    if kind == 0 or kind == 1:
        z, pos = _unary(words, pos, limit)
        if z < 0 or z > 62:
            return -1, pos
        if kind == 1:
            n = (np.int64(1) << z) | _bits(words, pos, z)
            pos += z
            z = n - 1
            if z > 62:
                return -1, pos
        v = ((np.int64(1) << z) | _bits(words, pos, z)) - 1
        return v, pos + z
    h, pos = _unary(words, pos, limit)
    if h < 0 or (h + 1) * k > 62:
        return -1, pos
    lo = np.int64(1) << (h * k)
    hi = np.int64(1) << ((h + 1) * k)
    mx = hi - lo
    lg = 63 - np.int64(leading_zeros(np.uint64(mx)))
    prefix = _bits(words, pos, lg)
    pos += lg
    limit_mb = (np.int64(1) << (lg + 1)) - mx
    if prefix >= limit_mb:
        prefix = (prefix << 1) | _bits(words, pos, 1)
        pos += 1
        prefix -= limit_mb
    return lo + prefix - 1, pos


@numba.njit(cache=True)
def decode_one(words, pos, limit, ck):
    """Decode the summary at ``pos`` → (length, term ids, counts, end pos); length −1 if corrupt."""
    length, pos = _read(words, pos, ck[0], ck[1], limit)
    s, pos = _read(words, pos, ck[2], ck[3], limit)
    if length < 0 or s < 0 or s > limit:
        return -1, np.empty(0, np.int64), np.empty(0, np.int64), pos
    terms = np.empty(s, np.int64)
    counts = np.empty(s, np.int64)
    t = -1
    for i in range(s):
        g, pos = _read(words, pos, ck[4], ck[5], limit)
        if g < 0:
            return -1, terms, counts, pos
        t += g + 1
        terms[i] = t
    c = 0
    for i in range(s - 1, -1, -1):
        g, pos = _read(words, pos, ck[6], ck[7], limit)
        if g < 0:
            return -1, terms, counts, pos
        if i == s - 1:
            c = g + 1
        else:
            c += (g >> 1) if (g & 1) == 0 else -((g + 1) >> 1)
        counts[i] = c
    return length, terms, counts, pos


@numba.njit(cache=True)
def decode_range(words, pos, count, limit, ck, lengths, sizes, terms, counts, ends):
    """Decode ``count`` consecutive summaries into preallocated arrays.

    Returns the number of pairs written, or −(i+1) if summary i is corrupt or overflows ``terms``.
    """
    p = 0
    for i in range(count):
        length, pos = _read(words, pos, ck[0], ck[1], limit)
        s, pos = _read(words, pos, ck[2], ck[3], limit)
        if length < 0 or s < 0 or p + s > terms.shape[0]:
            return -(i + 1)
        lengths[i] = length
        sizes[i] = s
        t = -1
        for j in range(s):
            g, pos = _read(words, pos, ck[4], ck[5], limit)
            if g < 0:
                return -(i + 1)
            t += g + 1
            terms[p + j] = t
        c = 0
        for j in range(s - 1, -1, -1):
            g, pos = _read(words, pos, ck[6], ck[7], limit)
            if g < 0:
                return -(i + 1)
            if j == s - 1:
                c = g + 1
            else:
                c += (g >> 1) if (g & 1) == 0 else -((g + 1) >> 1)
            counts[p + j] = c
        p += s
        ends[i] = pos
        if pos > limit:
            return -(i + 1)
    return p
