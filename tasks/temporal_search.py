"""Temporal search between two snapshots (seed 003 part 3, "Temporal Wikipedia search by edits and
linkage"): a BM25 seed set, change scores, seed expansion, the α/T score mix, then personalized
PageRank and personalized HITS over the candidate subgraph.

Snapshots are epochs of a fragment index built from several crawls (``stats.json`` lists them in
epoch order); links come from those crawls' link records, words from the index's version table.

* change(u) = |ln((in₂+1)/(in₁+1))| + |ln((out₂+1)/(out₁+1))| + |ln((words₂+1)/(words₁+1))|
  (degrees within the indexed pages; +1 so pages appearing or vanishing get a finite change).
* IR(u) = BM25 of u's version at the later epoch (OR of the query terms); the seed set is the top
  ``seeds`` pages by IR.
* score(v) = max over seed neighbours u of BM25(u) + change(u) + change(v) (later snapshot's links,
  either direction); the ``expand`` best non-seed neighbours join the candidates.
* p(u) = α·IR(u)/maxIR + (1−α)·change(u)/(change(u)+T), normalised to sum 1.
* PPR(v) = (1−c)·Σ_{uv} PPR(u)/out(u) + c·p(v) (dangling pages restart by p), c = 0.9 as the paper;
  personalized HITS is :func:`tasks.hits.personalized_hits` (eqs. 7–8: a supersource of weight
  ``hits_c``·p) on the candidate subgraph, ``hits_c`` = 200 by default, the paper's best value
  ("personalization is c = 0.9 for PageRank and 200 for HITS", its Figs. 1–2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from raycrawl.storage.fragment_index import FragmentIndex
from raycrawl.tasks.hits import personalized_hits
from raycrawl.tasks.pagerank import LinkMatrix, csr_from_edges
from raycrawl.tasks.query import QueryProcessor

HITS_C = 200.0  # supersource weight of personalized HITS: the paper's best value


@dataclass(slots=True)
class TemporalHit:
    page: int
    url: str
    score: float
    ir: float
    change: float


def epoch_links(crawl_dir: str | Path, id_of: dict[str, int]) -> set[tuple[int, int]]:
    """Arcs (u, v) between indexed pages in one crawl's link records (self-loops dropped);
    ``crawl_dir`` may name one pass of a periodic crawl (``DIR@K``, storage/crawl_epochs.py)."""
    from raycrawl.storage.crawl_epochs import parse_view, view_records

    arcs = set()
    for r in view_records(*parse_view(crawl_dir)):
        u = id_of.get(r.url)
        if u is None or r.status != 200:
            continue
        for link in r.links:
            v = id_of.get(link)
            if v is not None and v != u:
                arcs.add((u, v))
    return arcs


def change_scores(index: FragmentIndex, arcs1: set, arcs2: set, e1: int, e2: int) -> np.ndarray:
    """change(u) per docID between epochs e1 and e2."""
    n = len(index.urls)
    deg = np.zeros((4, n))
    for k, arcs in enumerate((arcs1, arcs2)):
        for u, v in arcs:
            deg[2 * k, u] += 1      # out
            deg[2 * k + 1, v] += 1  # in
    words = np.zeros((2, n))
    for v in index.versions:
        if v.epoch == e1:
            words[0, v.page] = v.length
        elif v.epoch == e2:
            words[1, v.page] = v.length
    ratio = lambda a, b: np.abs(np.log((b + 1) / (a + 1)))  # noqa: E731
    return ratio(deg[1], deg[3]) + ratio(deg[0], deg[2]) + ratio(words[0], words[1])


def personalized_pagerank(nodes: list[int], arcs: set, p: np.ndarray, c: float = 0.9, tol: float = 1e-12,
                          max_iter: int = 1000) -> np.ndarray:
    """PPR on the subgraph ``nodes`` (arcs outside it ignored); dangling mass restarts by ``p``."""
    pos = {u: i for i, u in enumerate(nodes)}
    sub = [(pos[u], pos[v]) for u, v in arcs if u in pos and v in pos]
    out = np.zeros(len(nodes))
    for u, _ in sub:
        out[u] += 1
    src = np.array([u for u, _ in sub], dtype=np.int64)
    dst = np.array([v for _, v in sub], dtype=np.int64)
    x = p.copy()
    for _ in range(max_iter):
        y = np.zeros_like(x)
        if sub:
            np.add.at(y, dst, x[src] / out[src])
        dangling = x[out == 0].sum()
        y = (1 - c) * (y + dangling * p) + c * p
        if np.abs(y - x).sum() < tol:
            return y
        x = y
    return x


def subgraph_matrix(nodes: list[int], arcs: set) -> LinkMatrix:
    """The subgraph of ``arcs`` on ``nodes`` (in that order; arcs outside it ignored)."""
    pos = {u: i for i, u in enumerate(nodes)}
    sub = [(pos[u], pos[v]) for u, v in arcs if u in pos and v in pos]
    src = np.array([u for u, _ in sub], dtype=np.int64)
    dst = np.array([v for _, v in sub], dtype=np.int64)
    return LinkMatrix.from_successors(*csr_from_edges(src, dst, len(nodes)))


def temporal_search(index: FragmentIndex, crawls: list[str | Path], query_terms: list[str], e1: int, e2: int,
                    k: int = 10, seeds: int = 20, expand: int = 100, alpha: float = 0.5, T: float = 10.0,
                    c: float = 0.9, method: str = "pagerank",
                    hits_c: float | None = None) -> tuple[list[TemporalHit], list[tuple[int, int]]]:
    """Top-k pages by ``method`` (pagerank | hits-auth | hits-hub | baseline = p(u)) and the
    later snapshot's arcs among them. ``c``: PageRank's teleport weight; ``hits_c``: HITS's
    supersource weight (None: :data:`HITS_C`)."""
    if method not in ("pagerank", "hits-auth", "hits-hub", "baseline"):
        raise ValueError(f"unknown method {method!r}")
    id_of = {u: i for i, u in enumerate(index.urls)}
    arcs1, arcs2 = epoch_links(crawls[e1], id_of), epoch_links(crawls[e2], id_of)
    change = change_scores(index, arcs1, arcs2, e1, e2)
    hits = QueryProcessor(index).search(query_terms, k=max(seeds, 1), mode="or", epoch=e2)
    if not hits:
        return [], []
    ir = {h.page: h.score for h in hits}
    nbrs: dict[int, set[int]] = {}
    for u, v in arcs2:
        nbrs.setdefault(u, set()).add(v)
        nbrs.setdefault(v, set()).add(u)
    cand: dict[int, float] = {}
    for u, s in ir.items():
        for v in nbrs.get(u, ()):
            if v not in ir:
                cand[v] = max(cand.get(v, -math.inf), s + change[u] + change[v])
    expansion = sorted(cand, key=lambda v: (-cand[v], v))[:expand]
    nodes = sorted(ir) + expansion
    max_ir = max(ir.values())
    p = np.array([alpha * ir.get(u, 0.0) / max_ir + (1 - alpha) * change[u] / (change[u] + T) for u in nodes])
    p = p / p.sum() if p.sum() > 0 else np.full(len(nodes), 1 / len(nodes))
    if method == "pagerank":
        score = personalized_pagerank(nodes, arcs2, p, c)
    elif method == "baseline":
        score = p
    else:
        h = personalized_hits(subgraph_matrix(nodes, arcs2), c=HITS_C if hits_c is None else hits_c, personalization=p)
        score = h.authority if method == "hits-auth" else h.hub
    order = sorted(range(len(nodes)), key=lambda i: (-score[i], nodes[i]))[:k]
    top = [TemporalHit(nodes[i], index.urls[nodes[i]], float(score[i]), ir.get(nodes[i], 0.0), float(change[nodes[i]]))
           for i in order]
    chosen = {h.page for h in top}
    return top, sorted((u, v) for u, v in arcs2 if u in chosen and v in chosen)
