"""The BV compressor (Boldi–Vigna, "The WebGraph Framework I"), as numba kernels.

For every node ``x`` (successors sorted, distinct) it tries each reference ``x - r``,
``0 ≤ r ≤ windowsize`` whose own reference chain is shorter than ``maxrefcount`` (so random
access never follows more than ``maxrefcount`` references), costs the record exactly with the
counting writers, and keeps the cheapest — WebGraph's own rule. A record is:

* copy blocks: the reference's list as alternating copy/skip runs, starting with a copy run
  (possibly empty); the last run is implicit (odd count: the tail is skipped, even: copied);
* the remaining "extra" successors: maximal runs of ≥ ``minintervallength`` consecutive ids
  become intervals (left extreme, length), the rest are ζk-coded gaps (residuals).

The exact bit layout is documented in ``storage.bv_decode``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from raycrawl.storage.codes import PAD_WORDS, int2nat, write_gamma, write_unary, write_zeta

# Indices of the statistics array filled by ``encode_graph``.
ST_OUTDEG, ST_REF, ST_BLOCKS, ST_INTERVALS, ST_RESIDUALS = 0, 1, 2, 3, 4
ST_COPIED, ST_INTERVALISED, ST_RESIDUAL_ARCS, ST_SUM_REF, ST_REF_NODES = 5, 6, 7, 8, 9
N_STATS = 10


@njit(cache=True)
def encode_node(buf, pos, x, succ, r, ref, window, min_interval, zk, blocks, extras, stats, record):
    """Write (or, with an empty ``buf``, only count) node ``x``'s record using reference
    ``x - r`` whose list is ``ref`` (ignored when ``r == 0``). ``blocks``/``extras`` are scratch
    of at least ``len(ref) + 1`` / ``len(succ)`` slots. Returns the new bit position."""
    d = succ.shape[0]
    p0 = pos
    pos = write_gamma(buf, pos, d)
    if record:
        stats[ST_OUTDEG] += pos - p0
    if d == 0:
        return pos
    if window > 0:
        p0 = pos
        pos = write_unary(buf, pos, r)
        if record:
            stats[ST_REF] += pos - p0
    ne = 0
    if r > 0:
        # Copy mask of ref against succ, as runs starting with a copy run.
        nb = 0
        run = 0
        copying = True
        j = 0
        k = 0
        nref = ref.shape[0]
        copied = 0
        while j < nref:
            while k < d and succ[k] < ref[j]:
                extras[ne] = succ[k]
                ne += 1
                k += 1
            inside = k < d and succ[k] == ref[j]
            if inside:
                k += 1
                copied += 1
            if inside == copying:
                run += 1
            else:
                blocks[nb] = run
                nb += 1
                run = 1
                copying = inside
            j += 1
        while k < d:
            extras[ne] = succ[k]
            ne += 1
            k += 1
        # The last run is implicit (see module doc); ``nb`` runs precede it.
        p0 = pos
        pos = write_gamma(buf, pos, nb)
        for i in range(nb):
            pos = write_gamma(buf, pos, blocks[i] if i == 0 else blocks[i] - 1)
        if record:
            stats[ST_BLOCKS] += pos - p0
            stats[ST_COPIED] += copied
            stats[ST_SUM_REF] += r
            stats[ST_REF_NODES] += 1
    else:
        for i in range(d):
            extras[i] = succ[i]
        ne = d
    if ne == 0:
        return pos
    # Intervals among the extras (only if enabled), written in place of those successors.
    nres_start = 0
    if min_interval > 0:
        p0 = pos
        # First pass: count intervals.
        ic = 0
        i = 0
        while i < ne:
            j = i
            while j + 1 < ne and extras[j + 1] == extras[j] + 1:
                j += 1
            if j - i + 1 >= min_interval:
                ic += 1
            i = j + 1
        pos = write_gamma(buf, pos, ic)
        prev = 0
        first = True
        nres = 0
        i = 0
        while i < ne:
            j = i
            while j + 1 < ne and extras[j + 1] == extras[j] + 1:
                j += 1
            ln = j - i + 1
            if ln >= min_interval:
                left = extras[i]
                if first:
                    pos = write_gamma(buf, pos, int2nat(left - x))
                    first = False
                else:
                    pos = write_gamma(buf, pos, left - prev - 1)
                pos = write_gamma(buf, pos, ln - min_interval)
                prev = left + ln
                if record:
                    stats[ST_INTERVALISED] += ln
            else:
                # Compact residuals to the front of ``extras`` (never overtakes i).
                for t in range(i, j + 1):
                    extras[nres] = extras[t]
                    nres += 1
            i = j + 1
        if record:
            stats[ST_INTERVALS] += pos - p0
        ne = nres
    p0 = pos
    prev = 0
    for i in range(nres_start, ne):
        if i == 0:
            pos = write_zeta(buf, pos, int2nat(extras[i] - x), zk)
        else:
            pos = write_zeta(buf, pos, extras[i] - prev - 1, zk)
        prev = extras[i]
    if record:
        stats[ST_RESIDUALS] += pos - p0
        stats[ST_RESIDUAL_ARCS] += ne
    return pos


@njit(cache=True)
def choose_references(indptr, indices, window, max_ref, min_interval, zk):
    """The reference each node uses (0 = none) and the exact total bit length."""
    n = indptr.shape[0] - 1
    maxd = 1
    for x in range(n):
        maxd = max(maxd, indptr[x + 1] - indptr[x])
    blocks = np.empty(maxd + 2, dtype=np.int64)
    extras = np.empty(maxd + 2, dtype=np.int64)
    stats = np.zeros(N_STATS, dtype=np.int64)
    empty = np.zeros(0, dtype=np.uint64)
    refs = np.zeros(n, dtype=np.int64)
    refcount = np.zeros(n, dtype=np.int64)
    total = 0
    zero, sizing = np.int64(0), np.bool_(False)  # no literal arguments: one compiled encode_node (storage/codes.py)
    for x in range(n):
        succ = indices[indptr[x] : indptr[x + 1]]
        best_r = 0
        best = encode_node(empty, zero, x, succ, zero, succ, window, min_interval, zk, blocks, extras, stats, sizing)
        if succ.shape[0] > 0:
            for r in range(1, min(window, x) + 1):
                y = x - r
                if refcount[y] >= max_ref:
                    continue
                ref = indices[indptr[y] : indptr[y + 1]]
                if ref.shape[0] == 0:
                    continue
                c = encode_node(empty, zero, x, succ, r, ref, window, min_interval, zk, blocks, extras, stats, sizing)
                if c < best:
                    best = c
                    best_r = r
        refs[x] = best_r
        refcount[x] = refcount[x - best_r] + 1 if best_r > 0 else 0
        total += best
    return refs, total


@njit(cache=True)
def encode_graph(indptr, indices, refs, total_bits, window, min_interval, zk):
    """Write every record with the chosen references. Returns ``(words, offsets, stats)``;
    ``offsets`` has ``n + 1`` entries, the last being the stream length in bits."""
    n = indptr.shape[0] - 1
    maxd = 1
    for x in range(n):
        maxd = max(maxd, indptr[x + 1] - indptr[x])
    blocks = np.empty(maxd + 2, dtype=np.int64)
    extras = np.empty(maxd + 2, dtype=np.int64)
    stats = np.zeros(N_STATS, dtype=np.int64)
    buf = np.zeros(total_bits // 64 + PAD_WORDS, dtype=np.uint64)
    offsets = np.empty(n + 1, dtype=np.int64)
    pos = np.int64(0)
    for x in range(n):
        offsets[x] = pos
        succ = indices[indptr[x] : indptr[x + 1]]
        r = refs[x]
        ref = indices[indptr[x - r] : indptr[x - r + 1]] if r > 0 else succ
        pos = encode_node(buf, pos, x, succ, r, ref, window, min_interval, zk, blocks, extras, stats, np.bool_(True))
    offsets[n] = pos
    return buf, offsets, stats
