"""The numba decoder of the archive of summaries (storage/summaries.py has the format).

A module of its own so that building an archive (``raycrawl summaries build``,
``SummaryWriter.finish``) imports no numba, which only reading needs: numba's import and first
dispatch cost ~0.7 CPU-s a process (measured). The readers are ``inline="always"``: as plain calls, sequential decoding was
12 % slower (benchmarks/summaries.py's archive, 50k summaries).
"""

from __future__ import annotations

import numba
import numpy as np

from raycrawl.storage.codes import read_code_within as _read  # the stream is codes.py's word image


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
