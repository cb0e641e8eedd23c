"""Query processing on a fragment index (seed 004 §5.2): document-at-a-time AND/OR over pages with
``nextGEQ`` skipping, *tickets* for fragments shared across pages (global sharing), then per-page
phase (ii) — which versions hold the terms — and phase (iii) BM25 over whole versions.

A :class:`PageCursor` walks one term's list in page (docID) order. Under local/no sharing a
fragment belongs to its primary page only, so the cursor is plain DAAT: fragIDs are numbered by
primary page, and ``next_geq(d)`` jumps to the first fragment of page ≥ d. Under global sharing a
fragment may also occur in later pages (the reuse table): when the cursor passes — or skips —
such a posting it files a ticket for each later page using it, in a heap keyed by that page, and
the cursor's current page is the smaller of its next posting's page and the earliest ticket.

BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5)), Lucene/tantivy's form) scores a
version with tf = Σ over its fragments (with repeats) of the fragment's f, its length in terms, and
N, df, avgdl over the versions in scope (all, or one epoch with ``epoch=K``).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from raycrawl.storage.fragment_index import FragmentIndex

MAXDOC = 1 << 62
LOOKUP_RATIO = 16  # (measured in benchmarks/search.py: the AND strategies' costs cross near here)
K1, B = 1.2, 0.75


@dataclass(slots=True)
class VersionHit:
    version: int
    epoch: int
    score: float


@dataclass(slots=True)
class PageHit:
    """A page's result: its best matching version's score and every matching version."""

    page: int
    url: str
    score: float
    versions: list[VersionHit]
    pagerank: float | None = None
    spam: float | None = None


@dataclass(slots=True)
class QueryStats:
    postings_visited: int = 0
    postings_skipped: int = 0
    tickets: int = 0
    pages_checked: int = 0
    blocks_looked_up: int = 0  # compiled AND by lookups: blocks of the longer lists decoded
    seconds: float = 0.0


class PageCursor:
    """One term's list traversed page by page (contract: pages come out strictly increasing)."""

    def __init__(self, index: FragmentIndex, term: str, stats: QueryStats) -> None:
        pl = index.postings(term)
        assert pl is not None
        self.frags = pl.frags
        self.freqs = pl.freqs
        self.docs = index.frag_page[pl.frags]   # non-decreasing: fragIDs are numbered by primary page
        self.reuse = index.reuse
        self.shared = index.shared_mask()[pl.frags]
        # shared_before[i] = shared postings before i: an O(1) "anything to ticket in [lo, hi)?".
        self.shared_before = np.concatenate(([0], np.cumsum(self.shared)))
        self.pos = 0
        self.tickets: list[tuple[int, int, int]] = []  # (page, fragID, f)
        self.stats = stats

    def __len__(self) -> int:
        return int(self.frags.size)

    def doc(self) -> int:
        """Current page: the smaller of the next posting's primary page and the earliest ticket."""
        d = int(self.docs[self.pos]) if self.pos < self.frags.size else MAXDOC
        return min(d, self.tickets[0][0]) if self.tickets else d

    def _ticket(self, lo: int, hi: int, min_page: int) -> None:
        """File tickets for the shared postings in [lo, hi) for their reusing pages ≥ min_page."""
        if self.shared_before[hi] == self.shared_before[lo]:
            return
        for i in np.flatnonzero(self.shared[lo:hi]) + lo:
            fid = int(self.frags[i])
            for p in self.reuse[fid]:
                if p >= min_page:
                    heapq.heappush(self.tickets, (p, fid, int(self.freqs[i])))
                    self.stats.tickets += 1

    def next_geq(self, d: int) -> int:
        """Advance to the first page ≥ d holding this term (nextGEQ); returns it or MAXDOC."""
        new = int(np.searchsorted(self.docs, d, side="left", sorter=None)) if self.pos < self.frags.size else self.pos
        new = max(new, self.pos)
        if new > self.pos:
            self.stats.postings_skipped += new - self.pos
            self._ticket(self.pos, new, d)  # a skipped posting may still matter for a later page
            self.pos = new
        while self.tickets and self.tickets[0][0] < d:
            heapq.heappop(self.tickets)
        return self.doc()

    def take(self, d: int) -> dict[int, int]:
        """{fragID: f} of this term in page d (must be the current page); moves past page d."""
        assert self.doc() == d
        out: dict[int, int] = {}
        start = self.pos
        while self.pos < self.frags.size and self.docs[self.pos] == d:
            out[int(self.frags[self.pos])] = int(self.freqs[self.pos])
            self.pos += 1
        self.stats.postings_visited += self.pos - start
        self._ticket(start, self.pos, d + 1)
        while self.tickets and self.tickets[0][0] == d:
            _, fid, f = heapq.heappop(self.tickets)
            out[fid] = f
        return out


def _count(entry: tuple[int, int, str]) -> int:
    return entry[0]


def _idf(n_versions: int, df: int) -> float:
    """BM25's idf (Lucene/tantivy's form, module docstring)."""
    return math.log(1 + (n_versions - df + 0.5) / (df + 0.5))


class QueryProcessor:
    """Runs queries on one :class:`FragmentIndex` (AND or OR, all versions or one epoch): compiled
    (tasks/query_kernel.py) unless ``compiled=False``, which runs the cursors below — the
    reference both are tested against."""

    def __init__(self, index: FragmentIndex, compiled: bool = True) -> None:
        self.index = index
        self.last_stats = QueryStats()
        self.kernel = None
        if compiled:
            from raycrawl.tasks.query_kernel import CompiledIndex

            self.kernel = CompiledIndex(index)

    def search(self, query_terms: list[str], k: int = 10, mode: str = "and", epoch: int | None = None) -> list[PageHit]:
        """Top-k pages by their best version's BM25; a version matches when it holds every term
        (AND) or any term (OR). ``epoch`` restricts matching versions and BM25 statistics."""
        if mode not in ("and", "or"):
            raise ValueError("mode must be 'and' or 'or'")
        idx = self.index
        t0 = time.perf_counter()
        terms = list(dict.fromkeys(query_terms))
        if self.kernel is not None:
            return self._compiled(terms, k, mode, epoch, t0)
        stats = self.last_stats = QueryStats()
        present = [t for t in terms if t in idx.dictionary]
        if not present or (mode == "and" and len(present) < len(terms)):
            return []
        n_versions, avgdl = idx.scope_stats(epoch)
        idf = {t: _idf(n_versions, idx.df(t, epoch)) for t in present}
        # Shortest list first, as in the paper's DAAT loop.
        cursors = sorted((PageCursor(idx, t, stats) for t in present), key=len)
        names = [t for t in sorted(present, key=lambda t: idx.dictionary[t][2])]
        hits: list[PageHit] = []
        d = 0
        while True:
            if mode == "and":
                d = cursors[0].next_geq(d)
                if d >= MAXDOC:
                    break
                agreed = True
                for c in cursors[1:]:
                    e = c.next_geq(d)
                    if e != d:
                        d, agreed = e, False
                        break
                if not agreed:
                    if d >= MAXDOC:
                        break
                    continue
                parts = [c.take(d) for c in cursors]
            else:
                d = min(c.next_geq(d) for c in cursors)
                if d >= MAXDOC:
                    break
                parts = [c.take(d) if c.doc() == d else {} for c in cursors]
            stats.pages_checked += 1
            hit = self._score_page(d, names, parts, idf, avgdl, mode, epoch)
            if hit is not None:
                hits.append(hit)
            d += 1
        hits.sort(key=lambda h: (-h.score, h.page))
        stats.seconds = time.perf_counter() - t0
        return hits[:k]

    def _compiled(self, terms: list[str], k: int, mode: str, epoch: int | None, t0: float) -> list[PageHit]:
        """:meth:`search` on the compiled path (tasks/query_kernel.py): the same terms, order, idf
        and results as the cursors', with as little Python around one kernel call as it takes."""
        idx, kern, dictionary = self.index, self.kernel, self.index.dictionary
        present = [(e[2], e[0], t) for t in terms if (e := dictionary.get(t)) is not None]
        stats = self.last_stats = QueryStats()
        if not present or (mode == "and" and len(present) < len(terms)):
            return []
        present.sort(key=_count)  # shortest list first (stable: the reference's order)
        n_versions, avgdl = idx.scope_stats(epoch)
        offs = np.array([off for _, off, _ in present], dtype=np.int64)
        idfs = np.array([_idf(n_versions, idx.df(t, epoch)) for _, _, t in present])
        # AND by lookups when the shortest list is much shorter than the others: its pages'
        # fragments are looked up in the other lists' blocks; else a merge of whole lists
        lookups = mode == "and" and len(present) > 1 and present[0][0] * LOOKUP_RATIO < present[1][0]
        ints, floats, ntop, npages, decoded, blocks = kern.run(offs, idfs, epoch, avgdl, mode == "and", lookups, k)
        # decoded: the postings and tickets of every term (merge), of the first term (lookups)
        stats.postings_visited = present[0][0] if lookups else sum(c for c, _, _ in present)
        stats.tickets = decoded - stats.postings_visited
        stats.blocks_looked_up = blocks
        urls, pagerank, spam = idx.urls, idx.pagerank, idx.spam
        ints, floats = ints.tolist(), floats.tolist()
        total = len(floats) - ntop
        ids, epochs, scores = ints[3 * ntop: 3 * ntop + total], ints[3 * ntop + total:], floats[ntop:]
        out = []
        for r in range(ntop):
            d, a, b = ints[3 * r: 3 * r + 3]
            out.append(PageHit(d, urls[d], floats[r], list(map(VersionHit, ids[a:b], epochs[a:b], scores[a:b])),
                               pagerank[d], spam[d]))
        stats.pages_checked = npages
        stats.seconds = time.perf_counter() - t0
        return out

    def _score_page(self, d: int, names: list[str], parts: list[dict[int, int]], idf: dict[str, float],
                    avgdl: float, mode: str, epoch: int | None) -> PageHit | None:
        """Phases (ii) and (iii): the page's versions that match, scored by BM25."""
        idx = self.index
        vhits = []
        for vid in idx.page_versions[d]:
            v = idx.versions[vid]
            if epoch is not None and v.epoch != epoch:
                continue
            score, matched = 0.0, 0
            for t, part in zip(names, parts, strict=True):
                tf = sum(part.get(f, 0) for f in v.frags)
                if tf:
                    matched += 1
                    score += idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * v.length / avgdl))
            if matched == len(names) or (mode == "or" and matched):
                vhits.append(VersionHit(vid, v.epoch, score))
        if not vhits:
            return None
        vhits.sort(key=lambda h: h.epoch)
        return PageHit(d, idx.urls[d], max(h.score for h in vhits), vhits, idx.pagerank[d], idx.spam[d])


@dataclass
class BruteForce:
    """The reference: every version's terms scanned directly (for tests and the benchmark)."""

    pages: list[tuple[str, list[tuple[int, list[str]]]]]
    _flat: list = field(default_factory=list)

    def search(self, query_terms: list[str], k: int = 10, mode: str = "and", epoch: int | None = None) -> list[tuple[int, float]]:
        """[(docID, best version score)] as :meth:`QueryProcessor.search` should return them."""
        from collections import Counter

        terms = list(dict.fromkeys(query_terms))
        vers = [(d, Counter(ws), len(ws)) for d, (_, vs) in enumerate(self.pages) for e, ws in vs
                if epoch is None or e == epoch]
        n = len(vers)
        avgdl = sum(v[2] for v in vers) / n if n else 0.0
        df = {t: sum(1 for v in vers if t in v[1]) for t in terms}
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
        best: dict[int, float] = {}
        for d, c, ln in vers:
            m = [t for t in terms if c[t]]
            if (mode == "and" and len(m) == len(terms)) or (mode == "or" and m):
                s = sum(idf[t] * c[t] * (K1 + 1) / (c[t] + K1 * (1 - B + B * ln / avgdl)) for t in m)
                best[d] = max(best.get(d, -1.0), s)
        return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]
