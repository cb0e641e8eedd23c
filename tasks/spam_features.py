"""Content features of web spam (seed 003 part 2, §5.1: Ntoulas et al.'s public content features).

Per HTML page (:func:`page_local_features` needs nothing but the page and the popular-query list,
so the crawl-time gate can use it; :class:`CorpusStats` adds what needs the whole corpus):

=================== ==========================================================================
feature             meaning
=================== ==========================================================================
words               visible words (``raycrawl.text.tokens(visible_text)``)
title_words         words of ``<title>``
avg_word_len        mean characters per visible word
anchor_frac         anchor-text words / visible words
visible_frac        visible-text bytes / HTML bytes
compress_ratio      visible-text bytes / zlib-compressed bytes (repetitive text compresses well)
entropy             entropy (bits) of the page's word distribution
query_precision     fraction of the words that are popular-query terms
query_recall        fraction of the popular-query terms present on the page
corpus_precision    fraction of the words among the corpus' 1,000 most frequent ones   [global]
corpus_recall       fraction of those 1,000 present on the page                        [global]
unigram_ll          mean log-likelihood of a word under the corpus unigram model       [global]
trigram_ll          mean log-likelihood of a word trigram (independent trigram model)  [global]
cond_trigram_ll     mean log P(w3 | w1 w2) (conditional trigram model)                 [global]
=================== ==========================================================================

Host features: ``mean_*``/``var_*`` of every page feature over a sample of up to ``max_pages``
HTML pages of the host (the first ones stored), ``maxpr_*`` = the features of the host's page with
the highest page-level PageRank, and ``pages`` (HTML pages stored). Feature sets as in Table 6:
**Aa** = query precision/recall aggregates; **A** = aggregates of the page-local features (no
corpus statistics, no PageRank); **B** = A + corpus features + the max-PageRank page's features.

Work is split into Ray tasks of ``batch_hosts`` hosts each, two passes: pass 1 counts terms and
trigrams per batch (reduced on the driver into :class:`CorpusStats` and the hosts' term counts for
BM25), pass 2 computes the page and host features.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from raycrawl.policies.spam_page import LOCAL_FEATURES, ParsedPage, host_name, page_local_features, parse_page
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.crawl_pages import is_page_record
from raycrawl.storage.link_records import iter_link_records
from raycrawl.storage.warc import read_record_at
from raycrawl.text import stems

log = logging.getLogger(__name__)

GLOBAL_FEATURES = ("corpus_precision", "corpus_recall", "unigram_ll", "trigram_ll", "cond_trigram_ll")
PAGE_FEATURES = LOCAL_FEATURES + GLOBAL_FEATURES
QUERY_FEATURES = ("query_precision", "query_recall")
TRIGRAM_BITS = 22  # hashed trigram table: 4M buckets, collisions only blur rare trigrams
CORPUS_TOP = 1000


def _word_ids(words: list[str]) -> np.ndarray:
    # Stable across processes (unlike hash()): trigram buckets must agree between Ray workers.
    import xxhash

    return np.fromiter((xxhash.xxh3_64_intdigest(w.encode()) & 0x7FFFFFFF for w in words), dtype=np.int64, count=len(words))


def _trigram_buckets(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trigram bucket, bigram-prefix bucket) of each word trigram."""
    if len(ids) < 3:
        e = np.zeros(0, dtype=np.int64)
        return e, e
    mask = (1 << TRIGRAM_BITS) - 1
    a, b, c = ids[:-2], ids[1:-1], ids[2:]
    bi = (a * 1_000_003 + b) & 0x7FFFFFFFFFFF
    tri = (bi * 998_244_353 + c) & mask
    return tri, (bi * 7 + 1) & mask


@dataclass(slots=True)
class CorpusStats:
    """Global statistics the [global] features need (from pass 1)."""

    top_terms: frozenset[str]
    unigram_logp: dict[str, float]
    unseen_logp: float
    trigram_counts: np.ndarray  # hashed trigram counts
    bigram_counts: np.ndarray   # hashed (w1, w2) prefix counts of those trigrams
    trigrams_total: int

    @classmethod
    def from_counts(cls, words: Counter, tri: np.ndarray, bi: np.ndarray) -> CorpusStats:
        total = sum(words.values())
        vocab = len(words)
        denom = total + vocab + 1  # add-one smoothing
        logp = {w: math.log((c + 1) / denom) for w, c in words.items()}
        top = frozenset(w for w, _ in words.most_common(CORPUS_TOP))
        return cls(top, logp, math.log(1 / denom), tri, bi, int(tri.sum()))

    def global_features(self, p: ParsedPage) -> np.ndarray:
        out = np.zeros(len(GLOBAL_FEATURES))
        n = len(p.words)
        if not n:
            return out
        out[0] = sum(w in self.top_terms for w in p.words) / n
        out[1] = len(self.top_terms.intersection(p.words)) / max(len(self.top_terms), 1)
        lp, unseen = self.unigram_logp, self.unseen_logp
        out[2] = sum(lp.get(w, unseen) for w in p.words) / n
        tri, bi = _trigram_buckets(_word_ids(p.words))
        if len(tri):
            tc = self.trigram_counts[tri].astype(np.float64)
            out[3] = float(np.mean(np.log((tc + 1) / (self.trigrams_total + len(self.trigram_counts)))))
            out[4] = float(np.mean(np.log((tc + 1) / (self.bigram_counts[bi] + 2))))
        return out


# ---------------------------------------------------------------------------- crawl scan
@dataclass(slots=True)
class HostPages:
    """The sampled HTML pages of one host: (url, warc file, offset), in crawl order."""

    host: str
    ip: str
    pages: list[tuple[str, str, int]]
    total: int  # HTML pages stored (before sampling)


def scan_crawl(crawl_dir: str | Path, max_pages: int = 400) -> tuple[dict[str, HostPages], list[tuple[str, list[str]]]]:
    """Hosts' sampled HTML pages, and (url, links) of every fetched page (for page PageRank).

    Raises FileNotFoundError when ``crawl_dir/links`` is missing.
    """
    crawl_dir = Path(crawl_dir)
    if not (layout(crawl_dir).links).is_dir():
        raise FileNotFoundError(f"{crawl_dir}/links: no link records (is this a crawl directory?)")
    return scan_records(iter_link_records(crawl_dir), max_pages)


def scan_records(records, max_pages: int = 400) -> tuple[dict[str, HostPages], list[tuple[str, list[str]]]]:
    """:func:`scan_crawl` over some link records (one pass of a periodic crawl: storage/crawl_epochs.py)."""
    hosts: dict[str, HostPages] = {}
    graph: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for rec in records:
        url = rec.url
        if not url or url in seen:
            continue  # a URL fetched again after a crash counts once (its first fetch)
        seen.add(url)
        graph.append((url, rec.links))
        if not is_page_record(rec):
            continue
        h = host_name(url)
        hp = hosts.get(h)
        if hp is None:
            hp = hosts[h] = HostPages(h, rec.ip, [], 0)
        hp.total += 1
        if len(hp.pages) < max_pages:
            hp.pages.append((url, rec.warc[0], int(rec.warc[1])))
    return hosts, graph


def _read_html(crawl_dir: Path, name: str, offset: int) -> bytes | None:
    try:
        return read_record_at(layout(crawl_dir).warc, name, offset)[2]
    except (OSError, ValueError, StopIteration) as exc:
        log.warning("unreadable WARC record %s@%d: %s", name, offset, exc)
        return None


def count_batch(crawl_dir: str, batch: list[HostPages]) -> tuple[Counter, np.ndarray, np.ndarray, dict[str, Counter]]:
    """Pass 1 over a batch of hosts: corpus word counts, hashed trigram/bigram counts, and each
    host's term (stem) counts — its BM25 virtual document."""
    words: Counter = Counter()
    tri = np.zeros(1 << TRIGRAM_BITS, dtype=np.int32)
    bi = np.zeros(1 << TRIGRAM_BITS, dtype=np.int32)
    host_terms: dict[str, Counter] = {}
    root = Path(crawl_dir)
    for hp in batch:
        terms: Counter = Counter()
        for _, name, offset in hp.pages:
            body = _read_html(root, name, offset)
            if body is None:
                continue
            p = parse_page(body)
            words.update(p.words)
            t, b = _trigram_buckets(_word_ids(p.words))
            np.add.at(tri, t, 1)
            np.add.at(bi, b, 1)
            terms.update(stems(p.words))
        host_terms[hp.host] = terms
    return words, tri, bi, host_terms


def features_batch(crawl_dir: str, batch: list[HostPages], query_terms: frozenset[str], stats: CorpusStats,
                   page_rank: dict[str, float]) -> tuple[list[dict], list[dict]]:
    """Pass 2 over a batch of hosts: one host feature row each, and the page rows (local features
    in crawl order, for training the crawl-time gate)."""
    root = Path(crawl_dir)
    host_rows, page_rows = [], []
    for hp in batch:
        feats, best, best_pr = [], None, -1.0
        for i, (url, name, offset) in enumerate(hp.pages):
            body = _read_html(root, name, offset)
            if body is None:
                continue
            p = parse_page(body)
            local = page_local_features(p, query_terms)
            f = np.concatenate([local, stats.global_features(p)])
            feats.append(f)
            page_rows.append({"host": hp.host, "order": i, **dict(zip(LOCAL_FEATURES, local.tolist(), strict=True))})
            pr = page_rank.get(url, 0.0)
            if pr > best_pr:
                best, best_pr = f, pr
        row: dict = {"host": hp.host, "ip": hp.ip, "pages": hp.total}
        m = np.array(feats) if feats else np.zeros((1, len(PAGE_FEATURES)))
        mean, var = m.mean(axis=0), m.var(axis=0)
        best = best if best is not None else np.zeros(len(PAGE_FEATURES))
        for j, name in enumerate(PAGE_FEATURES):
            row[f"mean_{name}"] = float(mean[j])
            row[f"var_{name}"] = float(var[j])
            row[f"maxpr_{name}"] = float(best[j])
        host_rows.append(row)
    return host_rows, page_rows


def feature_sets(columns: list[str]) -> dict[str, list[str]]:
    """Table 6's content feature sets over the host table's columns."""
    agg = [c for c in columns if c.startswith(("mean_", "var_"))]
    aa = [c for c in agg if c.split("_", 1)[1] in QUERY_FEATURES]
    a = [c for c in agg if c.split("_", 1)[1] in LOCAL_FEATURES] + ["pages"]
    b = a + [c for c in agg if c.split("_", 1)[1] in GLOBAL_FEATURES] + [c for c in columns if c.startswith("maxpr_")]
    return {"Aa": aa, "A": a, "B": b}


# ---------------------------------------------------------------------------- driver
def page_pagerank(graph: list[tuple[str, list[str]]]) -> dict[str, float]:
    """Page-level PageRank (α = 0.85) of the fetched pages (links to unfetched URLs dropped)."""
    from raycrawl.tasks.pagerank import LinkMatrix, csr_from_edges, pagerank

    ids = {u: i for i, (u, _) in enumerate(graph)}
    src, dst = [], []
    for u, links in graph:
        i = ids[u]
        for v in set(links):
            j = ids.get(v)
            if j is not None and j != i:
                src.append(i)
                dst.append(j)
    if not ids:
        return {}
    indptr, indices = csr_from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), len(ids))
    pr = pagerank(LinkMatrix.from_successors(indptr, indices)).vector
    return {u: float(pr[i]) for u, i in ids.items()}


def _batches(hosts: list[HostPages], batch_hosts: int) -> list[list[HostPages]]:
    return [hosts[i:i + batch_hosts] for i in range(0, len(hosts), batch_hosts)]


def compute_content_features(crawl_dir: str | Path, query_terms: frozenset[str] | set[str] = frozenset(),
                             max_pages: int = 400, batch_hosts: int = 64, use_ray: bool = True):
    """Host content features, page rows and host term counts of the crawl in ``crawl_dir``.

    Returns (hosts DataFrame-able list of dicts, page rows, {host: Counter of terms}). With
    ``use_ray`` the batches, when there are several, run as Ray tasks (Ray is started locally if
    needed); else inline.
    Raises FileNotFoundError for a directory without link records, ValueError when it holds no
    HTML page.
    """
    crawl_dir = Path(crawl_dir)
    query_terms = frozenset(query_terms)
    hosts, graph = scan_crawl(crawl_dir, max_pages)
    if not hosts:
        raise ValueError(f"{crawl_dir}: no stored HTML page in the link records")
    batches = _batches(sorted(hosts.values(), key=lambda h: h.host), batch_hosts)
    log.info("content features: %d hosts, %d pages sampled, %d tasks", len(hosts),
             sum(len(h.pages) for h in hosts.values()), len(batches))
    # One batch has nothing to spread: a Ray task would only add a worker's start (~1.5 CPU-s), or
    # a whole local Ray's, to a small crawl's features.
    use_ray = use_ray and len(batches) > 1
    if use_ray:
        import ray

        from raycrawl.tasks.spam_link_features import ensure_ray

        ensure_ray()
        count_remote = ray.remote(count_batch)
        parts = ray.get([count_remote.remote(str(crawl_dir), b) for b in batches])
    else:
        parts = [count_batch(str(crawl_dir), b) for b in batches]
    words: Counter = Counter()
    tri = np.zeros(1 << TRIGRAM_BITS, dtype=np.int64)
    bi = np.zeros(1 << TRIGRAM_BITS, dtype=np.int64)
    host_terms: dict[str, Counter] = {}
    for w, t, b, ht in parts:
        words.update(w)
        tri += t
        bi += b
        host_terms.update(ht)
    stats = CorpusStats.from_counts(words, tri, bi)
    pr = page_pagerank(graph)
    if use_ray:
        stats_ref, pr_ref = ray.put(stats), ray.put(pr)
        feat_remote = ray.remote(features_batch)
        results = ray.get([feat_remote.remote(str(crawl_dir), b, query_terms, stats_ref, pr_ref) for b in batches])
    else:
        results = [features_batch(str(crawl_dir), b, query_terms, stats, pr) for b in batches]
    host_rows = [r for hr, _ in results for r in hr]
    page_rows = [r for _, pr_ in results for r in pr_]
    return host_rows, page_rows, host_terms
