"""Post-crawl near-duplicate clustering (seed 001): sketches → LSH candidates → estimated Jaccard
→ union-find (single-link) clusters, over every stored page of a finished crawl.

Pages come from ``DIR/warc/*.warc.gz`` (HTML ``response`` records, read by
``storage.warc.iter_responses``, which skips the pages marked as crawl-time duplicates; the first
fetch of a URL wins). Crawl-time duplicates (exact or near, kept whole but marked, or revisit
records for byte-identical copies) join their representative's cluster through the ``dup_of``
field of their link record.

Outputs, in ``DIR/dedup/``:

* ``clusters.jsonl`` — one JSON object per cluster of ≥ 2 pages, largest first::

    {"cluster": 0, "representative": URL, "size": 3, "members": [URL, ...],
     "crawl_time": 1}

  ``members`` are in crawl order and include the representative (the first page fetched);
  ``crawl_time`` counts members already flagged as duplicates at crawl time.
* ``summary.json`` — the parameters and counts (see :func:`cluster_crawl`).
* ``report.txt`` — the same, for a human.

Candidate generation: pages with identical sketches are merged first (exact and trivially
near-identical copies, which would otherwise make huge LSH buckets); then for every band the
pages sharing the band key form a bucket and all pairs of a bucket of ≤ ``MAX_BUCKET_PAIRS``
members are candidates (a larger bucket contributes a star and a chain, enough for
single-link clustering of a bucket whose pages are near-duplicates of each other).
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from raycrawl.actors.visit.shingler import (
    DEFAULT_BANDS,
    DEFAULT_K,
    DEFAULT_NUM_PERM,
    DEFAULT_ROWS,
    DEFAULT_THRESHOLD,
    band_keys,
    shingle_hashes,
    sketch_matrix,
)
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import PARTS, layout
from raycrawl.text import visible_text

log = logging.getLogger(__name__)

DEDUP_SUBDIR = PARTS["dedup"]
MAX_BUCKET_MEMBERS = 32  # all pairs below this size (≤ 496 pairs); star + chain above
SKETCH_CHUNK = 2000


class UnionFind:
    """Disjoint sets over 0..n-1 with path halving and union by size."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def add(self) -> int:
        """A new singleton; returns its id."""
        self.parent.append(len(self.parent))
        self.size.append(1)
        return len(self.parent) - 1

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> bool:
        """Merge the sets of a and b; True if they were different."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return True

    def groups(self) -> dict[int, list[int]]:
        """root → members in increasing id order."""
        out: dict[int, list[int]] = {}
        for x in range(len(self.parent)):
            out.setdefault(self.find(x), []).append(x)
        return out


def gzip_damage(path: str | Path, chunk: int = 1 << 20) -> str | None:
    """Why a multi-member gzip file is damaged ("truncated", "corrupt: ..."), or None if intact.

    The WARC reader skips damage with a warning; this names the damaged files for the report.
    """
    with open(path, "rb") as f:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        fed = False  # has the current member received any byte?
        while data := f.read(chunk):
            while data:
                try:
                    d.decompress(data)
                except zlib.error as exc:
                    return f"corrupt gzip data ({exc})"
                fed = True
                if d.eof:
                    data = d.unused_data
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    fed = False
                else:
                    data = b""
    return "truncated gzip member" if fed else None


def iter_warc_pages(warc_dir: str | Path, damaged: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """(URL, visible text) of every page of the crawl (storage/crawl_pages.py), in crawl order.

    The WARC reader resumes after a damaged record and skips torn bodies; every damaged file is
    also logged here and named in ``damaged``, so the report can say what is missing.
    """
    from raycrawl.storage.crawl_pages import iter_pages
    from raycrawl.text import decode_body

    warc_dir = Path(warc_dir)
    for page in iter_pages(warc_dir.parent):  # decoded as the crawler decodes (charset, BOM, <meta>)
        yield page.url, visible_text(decode_body(page.body, page.charset)[0])
    for path in sorted(warc_dir.glob("*.warc.gz")):
        problem = gzip_damage(path)
        if problem:
            log.warning("%s: %s; the pages in the damaged part are missing", path, problem)
            if damaged is not None:
                damaged.append(path.name)


def _crawl_time_dups(crawl_dir: Path) -> list[tuple[str, str, str]]:
    """(url, dup_of, dup_kind) from the link records, if there are any."""
    if not (layout(crawl_dir).links).is_dir():
        return []
    from raycrawl.storage.link_records import iter_link_records

    return [
        (r.url, r.dup_of, r.dup_kind or "")
        for r in iter_link_records(crawl_dir)
        if r.dup_of
    ]


def candidate_pairs(sketches: np.ndarray, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS) -> np.ndarray:
    """Candidate pairs (i < j), shape (m, 2), from pages sharing an LSH band key."""
    n = len(sketches)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    keys = band_keys(sketches, bands, rows)
    pairs: list[np.ndarray] = []
    for b in range(bands):
        col = keys[:, b]
        order = np.argsort(col, kind="stable")
        sorted_keys = col[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], n]
        for s, e in zip(starts[ends - starts > 1], ends[ends - starts > 1], strict=True):
            members = np.sort(order[s:e])
            if len(members) <= MAX_BUCKET_MEMBERS:
                i, j = np.triu_indices(len(members), 1)
                pairs.append(np.stack([members[i], members[j]], axis=1))
            else:
                star = np.stack([np.full(len(members) - 1, members[0]), members[1:]], axis=1)
                chain = np.stack([members[:-1], members[1:]], axis=1)
                pairs.extend([star, chain])
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(pairs), axis=0)


def estimated_pair_jaccard(sketches: np.ndarray, pairs: np.ndarray, chunk: int = 100_000) -> np.ndarray:
    """Estimated Jaccard of each pair (fraction of equal sketch components)."""
    out = np.empty(len(pairs), dtype=np.float64)
    for s in range(0, len(pairs), chunk):
        p = pairs[s : s + chunk]
        out[s : s + chunk] = (sketches[p[:, 0]] == sketches[p[:, 1]]).mean(axis=1)
    return out


@dataclass
class Clustering:
    """The result of clustering pages: ``urls`` in crawl order, clusters as index lists."""

    urls: list[str]
    clusters: list[list[int]]  # size ≥ 2, members in crawl order, largest cluster first
    confirmed_pairs: np.ndarray  # (m, 2) pairs whose estimated Jaccard ≥ threshold
    candidates: int
    params: dict = field(default_factory=dict)

    def pair_set(self) -> set[tuple[int, int]]:
        """All (i < j) pairs inside a cluster: what the clustering calls duplicates."""
        out = set()
        for c in self.clusters:
            for a in range(len(c)):
                for b in range(a + 1, len(c)):
                    out.add((min(c[a], c[b]), max(c[a], c[b])))
        return out


def exact_pair_jaccard(sets: list[np.ndarray], pairs: np.ndarray) -> np.ndarray:
    """Exact Jaccard of each pair, from sorted unique shingle-hash arrays."""
    out = np.empty(len(pairs), dtype=np.float64)
    for n, (a, b) in enumerate(pairs):
        sa, sb = sets[a], sets[b]
        inter = np.intersect1d(sa, sb, assume_unique=True).size
        union = sa.size + sb.size - inter
        out[n] = inter / union if union else 1.0
    return out


def cluster_sketches(
    urls: list[str],
    sketches: np.ndarray,
    threshold: float = DEFAULT_THRESHOLD,
    bands: int = DEFAULT_BANDS,
    rows: int = DEFAULT_ROWS,
    extra_edges: Iterable[tuple[int, int]] = (),
    shingle_sets: list[np.ndarray] | None = None,
) -> Clustering:
    """Single-link clusters of pages whose Jaccard ≥ ``threshold`` (plus ``extra_edges``).

    Candidates are confirmed by their exact Jaccard when ``shingle_sets`` (sorted unique hashes
    per page) are given, by the sketch estimate otherwise.
    """
    n, num_perm = sketches.shape
    assert len(urls) == n
    uf = UnionFind(n)
    # Identical sketches first: one representative per distinct sketch goes through LSH.
    _, first, inverse = np.unique(sketches, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    for i in range(n):
        if first[inverse[i]] != i:
            uf.union(int(first[inverse[i]]), i)
    uniq = np.sort(first)
    cand_local = candidate_pairs(sketches[uniq], bands, rows)
    cand = uniq[cand_local] if len(cand_local) else cand_local
    if shingle_sets is not None:
        est = exact_pair_jaccard(shingle_sets, cand)
    else:
        est = estimated_pair_jaccard(sketches, cand)
    confirmed = cand[est >= threshold]
    for a, b in confirmed:
        uf.union(int(a), int(b))
    for a, b in extra_edges:
        uf.union(a, b)
    clusters = [m for m in uf.groups().values() if len(m) > 1]
    clusters.sort(key=lambda m: (-len(m), m[0]))
    same = np.flatnonzero(first[inverse] != np.arange(n))
    identical = np.stack([first[inverse[same]], same], axis=1) if len(same) else np.zeros((0, 2), np.int64)
    return Clustering(
        urls=urls,
        clusters=clusters,
        confirmed_pairs=np.concatenate([identical, confirmed]) if len(confirmed) else identical,
        candidates=len(cand),
        params={"threshold": threshold, "num_perm": num_perm, "bands": bands, "rows": rows,
                "confirm": "exact" if shingle_sets is not None else "estimate"},
    )


def cluster_texts(
    docs: list[tuple[str, str]],
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = DEFAULT_NUM_PERM,
    bands: int = DEFAULT_BANDS,
    k: int = DEFAULT_K,
    seed: int = 1,
    rows: int = DEFAULT_ROWS,
    confirm: str = "exact",
) -> Clustering:
    """Cluster (url, visible text) pairs (empty texts stay singletons).

    ``confirm="exact"`` keeps every page's shingle set (8 bytes per distinct shingle) to confirm
    LSH candidates by exact Jaccard; ``"estimate"`` keeps only sketches (4·num_perm bytes/page).
    """
    assert confirm in ("exact", "estimate")
    urls = [u for u, _ in docs]
    chunks, keep = [], []
    sets: list[np.ndarray] | None = [] if confirm == "exact" else None
    for s in range(0, len(docs), SKETCH_CHUNK):
        sh = [shingle_hashes(t, k) for _, t in docs[s : s + SKETCH_CHUNK]]
        nonempty = [i for i, h in enumerate(sh) if len(h)]
        chunks.append(sketch_matrix([sh[i] for i in nonempty], num_perm, seed))
        keep.extend(s + i for i in nonempty)
        if sets is not None:
            sets.extend(np.unique(sh[i]) for i in nonempty)
    sketches = np.concatenate(chunks) if chunks else np.zeros((0, num_perm), np.uint32)
    # Pages without words are never anyone's duplicate: cluster the others, map indices back.
    sub = cluster_sketches([urls[i] for i in keep], sketches, threshold, bands, rows, shingle_sets=sets)
    back = np.asarray(keep, dtype=np.int64)
    result = Clustering(
        urls=urls,
        clusters=[[keep[m] for m in c] for c in sub.clusters],
        confirmed_pairs=back[sub.confirmed_pairs] if len(sub.confirmed_pairs) else sub.confirmed_pairs,
        candidates=sub.candidates,
        params=sub.params,
    )
    result.params.update({"k": k, "seed": seed})
    return result


def cluster_crawl(
    crawl_dir: str | Path,
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = DEFAULT_NUM_PERM,
    bands: int = DEFAULT_BANDS,
    k: int = DEFAULT_K,
    out_dir: str | Path | None = None,
    rows: int = DEFAULT_ROWS,
    confirm: str = "exact",
) -> dict:
    """Cluster every stored page of the crawl in ``crawl_dir``; write ``DIR/dedup/*``.

    Returns the summary (also written to ``summary.json``). Raises UserError when the
    directory holds no crawl.
    """
    crawl_dir = Path(crawl_dir)
    if not crawl_dir.is_dir():
        raise UserError(f"{crawl_dir}: no such directory")
    warc_dir = layout(crawl_dir).warc
    if not warc_dir.is_dir() and not (layout(crawl_dir).links).is_dir():
        raise UserError(f"{crawl_dir}: not a crawl directory (no warc/ nor links/ inside)")
    if min(num_perm, bands, rows, k) < 1 or bands * rows > num_perm:
        raise UserError(
            f"need bands × rows ≤ num-perm and all ≥ 1 (got {bands} × {rows} and {num_perm}; k = {k})"
        )
    if confirm not in ("exact", "estimate"):
        raise UserError(f"--confirm must be exact or estimate, not {confirm!r}")
    if not 0 < threshold <= 1:
        raise UserError(f"--threshold must be in (0, 1], not {threshold}")
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise UserError(f"--out {out_dir} is a file, not a directory")
    t0 = time.perf_counter()
    seen: set[str] = set()
    docs: list[tuple[str, str]] = []
    damaged: list[str] = []
    if warc_dir.is_dir():
        for url, text in iter_warc_pages(warc_dir, damaged):
            if url not in seen:
                seen.add(url)
                docs.append((url, text))
    t_read = time.perf_counter() - t0
    if not docs and damaged and len(damaged) == len(list(warc_dir.glob("*.warc.gz"))):
        raise UserError(f"{warc_dir}: no readable WARC record ({len(damaged)} damaged files, e.g. {damaged[0]})")
    result = cluster_texts(docs, threshold, num_perm, bands, k, rows=rows, confirm=confirm)
    # Crawl-time duplicates (marked in the WARC, skipped by the reader) join their representative's cluster.
    index = {u: i for i, u in enumerate(result.urls)}
    crawl_dups = _crawl_time_dups(crawl_dir)
    flagged: set[int] = set()
    if crawl_dups:
        uf = UnionFind(len(result.urls))
        for c in result.clusters:
            for m in c[1:]:
                uf.union(c[0], m)
        for url, rep, _kind in crawl_dups:
            for u in (url, rep):
                if u not in index:
                    index[u] = uf.add()
                    result.urls.append(u)
            flagged.add(index[url])
            uf.union(index[rep], index[url])
        result.clusters = sorted(
            (m for m in uf.groups().values() if len(m) > 1), key=lambda m: (-len(m), m[0])
        )
    elapsed = time.perf_counter() - t0
    kinds: dict[str, int] = {}
    for _, _, kind in crawl_dups:
        kinds[kind or "unknown"] = kinds.get(kind or "unknown", 0) + 1
    summary = {
        "crawl_dir": str(crawl_dir),
        "pages_with_text": len(docs),
        "pages_total": len(result.urls),
        "clusters": len(result.clusters),
        "pages_in_clusters": sum(len(c) for c in result.clusters),
        "duplicate_pages": sum(len(c) - 1 for c in result.clusters),
        "largest_cluster": max((len(c) for c in result.clusters), default=0),
        "candidate_pairs": result.candidates,
        "confirmed_pairs": len(result.confirmed_pairs),
        "crawl_time_duplicates": kinds,
        "damaged_warc_files": damaged,
        "threshold": threshold,
        "num_perm": num_perm,
        "bands": bands,
        "rows": rows,
        "confirm": confirm,
        "k": k,
        "seconds": round(elapsed, 3),
        "seconds_reading_warc": round(t_read, 3),
    }
    out = Path(out_dir) if out_dir else crawl_dir / DEDUP_SUBDIR
    write_clusters(out, result, flagged, summary)
    return summary


def write_clusters(out: Path, result: Clustering, flagged: set[int], summary: dict) -> None:
    """Write clusters.jsonl, summary.json and report.txt atomically (temp file + rename)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "clusters.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for n, members in enumerate(result.clusters):
            rec = {
                "cluster": n,
                "representative": result.urls[members[0]],
                "size": len(members),
                "members": [result.urls[m] for m in members],
                "crawl_time": sum(1 for m in members if m in flagged),
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    tmp.replace(out / "clusters.jsonl")
    write_members_parquet(out / "clusters.parquet", result, flagged)
    write_sizes_png(out / "cluster-sizes.png", [len(m) for m in result.clusters], summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.txt").write_text(format_report(summary, result))


def write_sizes_png(path: Path, sizes: list[int], summary: dict) -> Path:
    """How many clusters have each size (log-log: a few mirrors hold many copies, most clusters
    are pairs); a crawl without clusters gets a picture saying so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    if sizes:
        counts = np.bincount(sizes)
        ks = np.nonzero(counts)[0]
        ax.loglog(ks, counts[ks], "o", ms=5, color="tab:purple")
        ax.set_xlim(1.5, max(ks) * 1.5)
        ax.set_ylim(0.7, counts.max() * 1.5)
        for axis in (ax.xaxis, ax.yaxis):  # sizes and counts as plain numbers, not 2×10⁰
            axis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        ax.text(0.5, 0.5, "no near-duplicate clusters", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("cluster size (pages)")
    ax.set_ylabel("clusters of that size")
    ax.set_title(f"{len(sizes):,} clusters holding {sum(sizes):,} of {summary.get('pages_with_text', 0):,} pages "
                 f"(Jaccard ≥ {summary.get('threshold')})", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_members_parquet(path: Path, result: Clustering, flagged: set[int]) -> None:
    """One row per clustered page (cluster, size, url, representative, flagged at crawl time):
    the clusters as a table for duckdb/pandas users, beside clusters.jsonl."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(n, len(members), result.urls[m], i == 0, m in flagged)
            for n, members in enumerate(result.clusters) for i, m in enumerate(members)]
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 5
    table = pa.table({"cluster": pa.array(cols[0], pa.int32()), "size": pa.array(cols[1], pa.int32()),
                      "url": pa.array(cols[2], pa.string()), "representative": pa.array(cols[3], pa.bool_()),
                      "crawl_time": pa.array(cols[4], pa.bool_())})
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def format_report(summary: dict, result: Clustering | None = None, top: int = 5) -> str:
    s = summary
    lines = [
        f"near-duplicate clusters of {s['crawl_dir']}",
        f"  pages: {s['pages_total']} ({s['pages_with_text']} with stored HTML)",
        f"  clusters (≥ 2 pages): {s['clusters']}, holding {s['pages_in_clusters']} pages;"
        f" {s['duplicate_pages']} pages are duplicates of a representative",
        f"  largest cluster: {s['largest_cluster']} pages",
        f"  candidate pairs (LSH): {s['candidate_pairs']}, confirmed ({s['confirm']} Jaccard ≥ {s['threshold']}):"
        f" {s['confirmed_pairs']}",
        f"  MinHash: {s['num_perm']} permutations, {s['bands']} bands × {s['rows']} rows, word {s['k']}-shingles",
        f"  already flagged at crawl time: {s['crawl_time_duplicates'] or 'none'}",
        f"  damaged WARC files (read up to the damage): {', '.join(s['damaged_warc_files']) or 'none'}",
        f"  time: {s['seconds']} s",
    ]
    if result is not None and result.clusters:
        lines.append("  largest clusters:")
        for members in result.clusters[:top]:
            lines.append(f"    {len(members):5d}  {result.urls[members[0]]}")
    return "\n".join(lines) + "\n"


def exact_jaccard_pairs(texts: list[str], k: int = DEFAULT_K, min_jaccard: float = 0.0) -> dict:
    """Exact Jaccard of the shingle sets of every pair (i < j) sharing a shingle, ≥ ``min_jaccard``.

    One sparse matrix product (pages × distinct shingles): fine for a few thousand pages.
    Returns {(i, j): J}.
    """
    import scipy.sparse as sp

    sets = [np.unique(shingle_hashes(t, k)) for t in texts]
    lengths = np.array([len(s) for s in sets], dtype=np.int64)
    allh = np.concatenate(sets) if sets else np.zeros(0, np.uint64)
    _, col = np.unique(allh, return_inverse=True)
    row = np.repeat(np.arange(len(sets)), lengths)
    ncols = int(col.max()) + 1 if len(col) else 0
    a = sp.csr_matrix((np.ones(len(col), dtype=np.int32), (row, col.reshape(-1))), shape=(len(sets), ncols))
    inter = sp.triu(a @ a.T, k=1).tocoo()
    union = lengths[inter.row] + lengths[inter.col] - inter.data
    jac = inter.data / np.maximum(union, 1)
    keep = (jac >= min_jaccard) & (jac > 0)
    return {
        (int(i), int(j)): float(x)
        for i, j, x in zip(inter.row[keep], inter.col[keep], jac[keep], strict=True)
    }


def pair_metrics(predicted: set, truth: set) -> dict[str, float]:
    """Precision and recall of predicted duplicate pairs against true ones."""
    tp = len(predicted & truth)
    return {
        "true_pairs": len(truth),
        "predicted_pairs": len(predicted),
        "precision": tp / len(predicted) if predicted else 1.0,
        "recall": tp / len(truth) if truth else 1.0,
    }
