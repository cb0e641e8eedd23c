"""The compiled query path of a fragment index (numba): decoding the query's lists (var-byte gaps,
bit-packed f) straight from the memory-mapped ``postings.bin``, the tickets of global sharing,
document-at-a-time AND/OR over pages, and phases (ii)–(iii) (which versions match, BM25) in one
call per query.

Profile of the Python path (benchmarks/search.py, 2-term AND, 2,137 versions): 0.19 ms a query, of
which decoding two lists with numpy's vectorised var-byte (a dozen array operations each, on lists
of tens of postings) and the per-page Python loops (cursor steps, dict lookups per fragment) were
all but a few µs; numpy's fixed cost per call dominates short lists. Compiled, the same work is a
few µs, and a query costs one dispatch (:func:`search`) plus building its top-k hits.

The algorithm is :mod:`raycrawl.tasks.query`'s (the reference the tests hold both to): a term's
stream of (page, fragID, f) is its postings in fragID order — numbered by primary page, so
page order — plus, under global sharing, one *ticket* per later page reusing a shared fragment.

The helpers are plain ``njit`` functions, not ``inline="always"``: numba's own inlining copied
them into every caller before compiling, ~9 CPU-s more of compiling from a cold cache (the
kernels' tests) for no query-latency gain (benchmarks/search.py: 0.023–0.025 ms against
0.024–0.026 ms). The BV and summary decoders keep it: without it they decoded 12–34 % slower.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from raycrawl.storage.postings import BLOCK

K1, B = 1.2, 0.75


@njit(cache=True)
def _vbyte(blob, pos):
    """(value, next position) of the var-byte value at ``blob[pos]`` (stop bit 0x80 on the last byte)."""
    v = np.int64(0)
    shift = 0
    while True:
        c = np.int64(blob[pos])
        pos += 1
        v |= (c & 0x7F) << shift
        if c & 0x80:
            return v, pos
        shift += 7


@njit(cache=True)
def _bits(blob, pos, j, w):
    """Value ``j`` of a bit-packed run of ``w``-bit values (little-endian bit order) at ``blob[pos]``."""
    if w == 0:
        return np.int64(0)
    bit = j * w
    p = pos + (bit >> 3)
    s = bit & 7
    v = np.int64(0)
    k = 0
    while 8 * k < s + w:
        v |= np.int64(blob[p + k]) << (8 * k)
        k += 1
    return (v >> s) & ((np.int64(1) << w) - 1)


@njit(cache=True)
def _gaps_at(blob, off):
    """(n, position of a list's fragID gaps, position of its skip table or -1)."""
    n, pos = _vbyte(blob, off)
    table = -1
    if n > BLOCK:
        size, pos = _vbyte(blob, pos)
        table = pos
        pos += size
    return n, pos, table


@njit(cache=True)
def _streams(blob, offs, frag_page, reuse_start, reuse_pages):
    """Every term's (pages, fragIDs, f) sorted by page — its postings and their tickets — one
    after the other in three flat arrays; term i's part is ``[starts[i], starts[i + 1])``."""
    t = offs.size
    counts = np.empty(t + 1, np.int64)  # postings of the terms before term i
    counts[0] = 0
    for i in range(t):
        n, _, _ = _gaps_at(blob, offs[i])
        counts[i + 1] = counts[i] + n
    frags = np.empty(counts[t], np.int64)
    freqs = np.empty(counts[t], np.int64)
    starts = np.zeros(t + 1, np.int64)
    for i in range(t):  # decode each list once: its gaps, then its f
        n, pos, _ = _gaps_at(blob, offs[i])
        acc = np.int64(0)
        extra = 0
        for j in range(counts[i], counts[i + 1]):
            g, pos = _vbyte(blob, pos)
            acc += g
            frags[j] = acc
            extra += reuse_start[acc + 1] - reuse_start[acc]
        j = counts[i]
        while j < counts[i + 1]:  # f − 1 bit-packed per block: a width byte, then the values
            w = np.int64(blob[pos])
            cnt = min(BLOCK, counts[i + 1] - j)
            for k in range(cnt):
                freqs[j + k] = 1 + _bits(blob, pos + 1, k, w)
            pos += 1 + (cnt * w + 7) // 8
            j += cnt
        starts[i + 1] = starts[i] + n + extra
    pages = np.empty(starts[t], np.int64)
    fr = np.empty(starts[t], np.int64)
    ff = np.empty(starts[t], np.int64)
    for i in range(t):
        a, z = counts[i], counts[i + 1]
        extra = starts[i + 1] - starts[i] - (z - a)
        if extra == 0:  # no shared fragment: fragID order is page order
            for j in range(a, z):
                w = starts[i] + j - a
                pages[w], fr[w], ff[w] = frag_page[frags[j]], frags[j], freqs[j]
            continue
        # tickets: the later pages reusing a shared fragment, sorted, then merged with the postings
        tp = np.empty(extra, np.int64)
        tf = np.empty(extra, np.int64)
        tc = np.empty(extra, np.int64)
        m = 0
        for j in range(a, z):
            for r in range(reuse_start[frags[j]], reuse_start[frags[j] + 1]):
                tp[m], tf[m], tc[m] = reuse_pages[r], frags[j], freqs[j]
                m += 1
        order = np.argsort(tp, kind="mergesort")
        w, j, m = starts[i], a, 0
        while j < z or m < extra:
            if m == extra or (j < z and frag_page[frags[j]] <= tp[order[m]]):
                pages[w], fr[w], ff[w] = frag_page[frags[j]], frags[j], freqs[j]
                j += 1
            else:
                o = order[m]
                pages[w], fr[w], ff[w] = tp[o], tf[o], tc[o]
                m += 1
            w += 1
    return pages, fr, ff, starts


@njit(cache=True)
def _compact(npages, nvh, decoded, blocks, topk, ires, fres, order, v_epoch):
    """The top ``topk`` pages, compact, for one ``tolist`` each: ints [page, its first version hit,
    end] per top page, then those version hits' ids (the index's), then their epochs; floats the
    pages' scores, then the version hits' scores. Returns (ints, floats, top pages, all matching
    pages, stream entries decoded)."""
    npmax = (ires.size - fres.size - 1) // 2
    out_page, out_first, vh_id = ires[npmax:2 * npmax], ires[2 * npmax:3 * npmax + 1], ires[3 * npmax + 1:]
    out_score, vh_score = fres[:npmax], fres[npmax:]
    top = np.argsort(-out_score[:npages], kind="mergesort")[:topk]  # ties: by page (pages come in order)
    ntop = top.size
    total = 0
    for r in range(ntop):
        total += out_first[top[r] + 1] - out_first[top[r]]
    ints = np.empty(3 * ntop + 2 * total, np.int64)
    floats = np.empty(ntop + total, np.float64)
    w = 0
    for r in range(ntop):
        i = top[r]
        a, b = out_first[i], out_first[i + 1]
        ints[3 * r], ints[3 * r + 1], ints[3 * r + 2] = out_page[i], w, w + b - a
        floats[r] = out_score[i]
        for j in range(a, b):
            ints[3 * ntop + w] = order[vh_id[j]]
            ints[3 * ntop + total + w] = v_epoch[vh_id[j]]
            floats[ntop + w] = vh_score[j]
            w += 1
    return ints, floats, ntop, npages, decoded, blocks


@njit(cache=True)
def _score_marked(idf, v0, nv, epoch, v_epoch, v_len, v_fstart, v_frags, mark, vscore, vmatched, avgdl):
    """Add a term's BM25 to each version of a page (``v0``… ``nv`` of them, of ``epoch`` if ≥ 0)
    that holds it, its f per fragment being in ``mark``; how many versions hold it."""
    holding = 0
    for vv in range(nv):
        vi = v0 + vv
        if epoch >= 0 and v_epoch[vi] != epoch:
            continue
        tf = 0
        for q in range(v_fstart[vi], v_fstart[vi + 1]):
            tf += mark[v_frags[q]]
        if tf:
            vmatched[vv] += 1
            vscore[vv] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * v_len[vi] / avgdl))
            holding += 1
    return holding


@njit(cache=True)
def _emit(d, v0, nv, need, vmatched, vscore, ires, fres, npages, nvh):
    """Record page ``d``'s versions that matched at least ``need`` terms (and the page, if any did)
    in ``ires``/``fres``, and zero the per-version scratch; the new (pages, version hits) counts."""
    npmax = (ires.size - fres.size - 1) // 2
    best = -1.0
    hit = False
    for vv in range(nv):
        if vmatched[vv] >= need:
            ires[3 * npmax + 1 + nvh] = v0 + vv
            fres[npmax + nvh] = vscore[vv]
            nvh += 1
            if not hit or vscore[vv] > best:
                best = vscore[vv]
            hit = True
        vscore[vv] = 0.0
        vmatched[vv] = 0
    if hit:
        ires[npmax + npages] = d
        fres[npages] = best
        npages += 1
        ires[2 * npmax + npages] = nvh
    return npages, nvh


@njit(cache=True)
def _run(blob, frag_page, reuse_start, reuse_pages, page_vstart, v_epoch, v_len, v_fstart, v_frags, mark, memo,
         vscore, vmatched, ires, fres, order, offs, idfs, epoch, avgdl, conjunctive, topk):
    """Every matching page, written into ``ires``/``fres`` (:class:`CompiledIndex`'s layout): the
    indexes of the top ``k`` (best first, ties by page), the pages, where each page's hits start in
    the version hits, the version hits' ids; the pages' best scores, the version hits' scores.
    Returns (top count, pages, version hits, stream entries decoded). ``mark`` (one per fragment), ``vscore`` and
    ``vmatched`` (one per version of the largest page) are scratch space, all zero on entry and exit."""
    t = offs.size
    pages, frs, ffs, starts = _streams(blob, offs, frag_page, reuse_start, reuse_pages)
    cur = starts[:t].copy()
    ends = np.zeros(t, np.int64)
    npmax = page_vstart.size - 1
    npages = nvh = np.int64(0)  # not literal 0: _compact compiles once (storage/codes.py)
    ires[2 * npmax] = 0  # the first page's version hits start at 0
    big = np.int64(1) << 62
    d = np.int64(0)
    while True:
        # the next page: AND — every term's stream at the same page; OR — the smallest current page
        if conjunctive:
            agreed = False
            while not agreed:
                agreed = True
                for i in range(t):
                    k, z = cur[i], starts[i + 1]
                    while k < z and pages[k] < d:  # the lists are decoded whole: a linear step is cheapest
                        k += 1
                    cur[i] = k
                    if k >= starts[i + 1]:
                        d = big
                        break
                    if pages[k] != d:
                        d = max(d, pages[k])
                        agreed = False
                if d == big:
                    break
        else:
            d = big
            for i in range(t):
                if cur[i] < starts[i + 1] and pages[cur[i]] < d:
                    d = pages[cur[i]]
        if d == big:
            break
        for i in range(t):
            e = cur[i]
            while e < starts[i + 1] and pages[e] == d:
                e += 1
            ends[i] = e
        v0, v1 = page_vstart[d], page_vstart[d + 1]
        nv = v1 - v0
        for i in range(t):
            for j in range(cur[i], ends[i]):
                mark[frs[j]] = ffs[j]
            _score_marked(idfs[i], v0, nv, epoch, v_epoch, v_len, v_fstart, v_frags, mark, vscore, vmatched, avgdl)
            for j in range(cur[i], ends[i]):
                mark[frs[j]] = 0
            cur[i] = ends[i]
        npages, nvh = _emit(d, v0, nv, t if conjunctive else 1, vmatched, vscore, ires, fres, npages, nvh)
        d += 1
    return _compact(npages, nvh, pages.size, np.int64(0), topk, ires, fres, order, v_epoch)


@njit(cache=True)
def _blocks(blob, offs, first):
    """The skip data of terms ``first``… : per block its last fragID, the last fragID before it,
    where its gaps and its f start, and its size; term i's blocks are ``[tb[i], tb[i + 1])``."""
    t = offs.size
    tb = np.zeros(t + 1, np.int64)
    for i in range(t):
        n, _, _ = _gaps_at(blob, offs[i])
        tb[i + 1] = tb[i] + (0 if i < first else (n + BLOCK - 1) // BLOCK)
    last = np.empty(tb[t], np.int64)
    before = np.empty(tb[t], np.int64)
    goff = np.empty(tb[t], np.int64)
    foff = np.empty(tb[t], np.int64)
    size = np.empty(tb[t], np.int64)
    for i in range(first, t):
        n, gpos, table = _gaps_at(blob, offs[i])
        a = tb[i]
        if table < 0:  # one block, no table: find where its f start
            pos, acc = gpos, np.int64(0)
            for _ in range(n):
                g, pos = _vbyte(blob, pos)
                acc += g
            last[a], before[a], goff[a], foff[a], size[a] = acc, 0, gpos, pos, n
            continue
        pos, prev, g0, f0 = table, np.int64(0), gpos, np.int64(0)
        for b in range(tb[i + 1] - a):
            dl, pos = _vbyte(blob, pos)
            gb, pos = _vbyte(blob, pos)
            fb, pos = _vbyte(blob, pos)
            last[a + b], before[a + b], goff[a + b], foff[a + b] = prev + dl, prev, g0, f0
            size[a + b] = min(BLOCK, n - b * BLOCK)
            prev += dl
            g0 += gb
            f0 += fb
        for b in range(tb[i + 1] - a):  # the f area follows the gaps area
            foff[a + b] += g0
    return tb, last, before, goff, foff, size


@njit(cache=True)
def _lookup(blob, i, frag, tb, last, before, goff, foff, size, cached, cfr, cff, looked):
    """f of ``frag`` in term i's list (0 if absent), decoding only the block that may hold it (the
    last block decoded is kept)."""
    a, z = tb[i], tb[i + 1]
    b = a + np.searchsorted(last[a:z], frag)
    if b >= z:
        return 0
    base = i * BLOCK
    if cached[i] != b:
        pos, acc, w = goff[b], before[b], np.int64(blob[foff[b]])
        for j in range(size[b]):
            g, pos = _vbyte(blob, pos)
            acc += g
            cfr[base + j], cff[base + j] = acc, 1 + _bits(blob, foff[b] + 1, j, w)
        cached[i] = b
        looked[0] += 1
    k = np.searchsorted(cfr[base: base + size[b]], frag)
    return cff[base + k] if k < size[b] and cfr[base + k] == frag else 0


@njit(cache=True)
def _run_and(blob, frag_page, reuse_start, reuse_pages, page_vstart, v_epoch, v_len, v_fstart, v_frags, mark,
             memo, vscore, vmatched, ires, fres, order, offs, idfs, epoch, avgdl, topk):
    """AND: the pages of the first (shortest) term's postings and tickets are the candidates; the
    other terms are looked up fragment by fragment of a candidate's versions, through their skip
    tables, so only the blocks holding those fragments are decoded. Returns what :func:`_run` does.
    Scratch space, restored on exit: ``mark`` (0) and ``memo`` (−1) one per fragment, ``vscore`` (0)
    and ``vmatched`` (0) one per version of the widest page."""
    t = offs.size
    pages, frs, ffs, _ = _streams(blob, offs[:1], frag_page, reuse_start, reuse_pages)
    tb, last, before, goff, foff, size = _blocks(blob, offs, 1)
    cached = np.full(t, -1, np.int64)
    looked = np.zeros(1, np.int64)  # blocks decoded by lookups
    cfr = np.empty(t * BLOCK, np.int64)
    cff = np.empty(t * BLOCK, np.int64)
    npmax = page_vstart.size - 1
    npages = nvh = np.int64(0)  # not literal 0: _compact compiles once (storage/codes.py)
    ires[2 * npmax] = 0  # the first page's version hits start at 0
    j = 0
    while j < pages.size:
        d = pages[j]
        e = j
        while e < pages.size and pages[e] == d:
            mark[frs[e]] = ffs[e]
            e += 1
        v0, v1 = page_vstart[d], page_vstart[d + 1]
        # the first term: from its postings and tickets in this page
        alive = _score_marked(idfs[0], v0, v1 - v0, epoch, v_epoch, v_len, v_fstart, v_frags, mark, vscore, vmatched,
                              avgdl)
        for k in range(j, e):
            mark[frs[k]] = 0
        if alive:
            touched = np.empty(v_fstart[v1] - v_fstart[v0], np.int64)
            for i in range(1, t):  # the others: looked up, each fragment once per term and page
                nt = 0
                for vv in range(v1 - v0):
                    if vmatched[vv] != i:
                        continue
                    vi = v0 + vv
                    tf = 0
                    for q in range(v_fstart[vi], v_fstart[vi + 1]):
                        fr = v_frags[q]
                        if memo[fr] < 0:
                            memo[fr] = _lookup(blob, i, fr, tb, last, before, goff, foff, size, cached, cfr, cff,
                                               looked)
                            touched[nt] = fr
                            nt += 1
                        tf += memo[fr]
                    if tf:
                        vmatched[vv] += 1
                        vscore[vv] += idfs[i] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * v_len[vi] / avgdl))
                for k in range(nt):
                    memo[touched[k]] = -1
        npages, nvh = _emit(d, v0, v1 - v0, t, vmatched, vscore, ires, fres, npages, nvh)
        j = e
    return _compact(npages, nvh, pages.size, looked[0], topk, ires, fres, order, v_epoch)


class CompiledIndex:
    """A fragment index's tables as the arrays :func:`search` reads (built once per index)."""

    def __init__(self, index) -> None:
        self.blob = np.frombuffer(index.postings_blob, dtype=np.uint8) if len(index.postings_blob) else np.zeros(1, np.uint8)
        self.frag_page = np.ascontiguousarray(index.frag_page, dtype=np.int64)
        nfrags = self.frag_page.size
        counts = np.zeros(nfrags + 1, np.int64)
        for fid, users in index.reuse.items():
            counts[fid + 1] = len(users)
        self.reuse_start = np.cumsum(counts)
        self.reuse_pages = np.zeros(int(self.reuse_start[-1]), np.int64)
        for fid, users in index.reuse.items():
            self.reuse_pages[self.reuse_start[fid]:self.reuse_start[fid + 1]] = users
        vcounts = np.array([len(v) for v in index.page_versions], dtype=np.int64)
        self.page_vstart = np.concatenate(([0], np.cumsum(vcounts)))
        # versions in page order (page_versions lists each page's ids in epoch order)
        self.order = np.array([vid for vids in index.page_versions for vid in vids], dtype=np.int64)
        vs = [index.versions[i] for i in self.order]
        self.v_epoch = np.array([v.epoch for v in vs], dtype=np.int64)
        self.v_len = np.array([v.length for v in vs], dtype=np.float64)
        self.v_fstart = np.concatenate(([0], np.cumsum([len(v.frags) for v in vs]))).astype(np.int64)
        self.v_frags = np.array([f for v in vs for f in v.frags], dtype=np.int64)
        # scratch space of _run, zero between queries (not thread-safe: one query at a time)
        self.mark = np.zeros(max(nfrags, 1), np.int64)
        self.memo = np.full(max(nfrags, 1), -1, np.int64)
        widest = int(vcounts.max()) if vcounts.size else 0
        self.vscore = np.zeros(widest, np.float64)
        self.vmatched = np.zeros(widest, np.int64)
        # results of _run: ints [top | pages | first hit per page (+1) | version ids], floats
        # [page scores | version scores]; a query matches each page and version at most once
        npages, nversions = len(index.page_versions), len(index.versions)
        self.npages = npages
        self.ires = np.zeros(3 * npages + 1 + nversions, np.int64)
        self.fres = np.zeros(npages + nversions, np.float64)
        self.tables = (self.blob, self.frag_page, self.reuse_start, self.reuse_pages, self.page_vstart, self.v_epoch,
                       self.v_len, self.v_fstart, self.v_frags, self.mark, self.memo, self.vscore, self.vmatched,
                       self.ires, self.fres, self.order)

    def run(self, offs: np.ndarray, idfs: np.ndarray, epoch: int | None, avgdl: float, conjunctive: bool,
            lookups: bool, k: int):
        """:func:`_compact`'s results for the query of the lists at ``offs`` (shortest first)."""
        e = -1 if epoch is None else epoch
        if conjunctive and lookups:
            return _run_and(*self.tables, offs, idfs, e, avgdl, k)
        return _run(*self.tables, offs, idfs, e, avgdl, conjunctive, k)
