"""``raycrawl search DIR "query"``: BM25 top-k pages (and their matching versions) from DIR/index.

Query words go through the same pipeline as pages (tokens, stopwords out, Porter stems). AND by
default (every term in one version), ``--or`` for any term; ``--version K`` searches epoch K only
(its versions, and BM25 statistics of that epoch). See docs/search.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import index_dir as crawl_index_dir


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "search",
        help="search the fragment index of a crawl (BM25 over page versions)",
        description="Top-k pages by the BM25 score of their best matching version (see docs/search.md).",
    )
    p.add_argument("dir", type=Path, help="crawl directory holding index/ (or an index directory)")
    p.add_argument("query", help="query words")
    p.add_argument("--version", type=int, default=None, metavar="K", help="search only the versions of epoch K")
    p.add_argument("--or", action="store_true", dest="any", help="match versions holding any query term (default: all)")
    p.add_argument("-k", "--top", type=int, default=10, dest="k", help="results to show (default 10)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--temporal", type=int, nargs=2, metavar=("E1", "E2"), default=None,
                   help="temporal search between epochs E1 and E2 (seed expansion by change, personalized ranks)")
    p.add_argument("--method", choices=("pagerank", "hits-auth", "hits-hub", "baseline"), default="pagerank",
                   help="temporal ranking (default personalized PageRank)")
    p.add_argument("--alpha", type=float, default=0.5, help="temporal: weight of IR vs change (default 0.5)")
    p.add_argument("--hits-c", type=float, default=None, metavar="C",
                   help="temporal HITS: supersource weight (default 200, the paper's best value)")
    p.set_defaults(func=handle)


def open_index(d: Path):
    """The FragmentIndex of crawl dir ``d`` (or index dir ``d``); UserError when there is none."""
    from raycrawl.storage.fragment_index import FragmentIndex

    idx = crawl_index_dir(d)
    if not any((idx / name).exists() for name in ("query.bin", "tables.msgpack")):  # tables.msgpack: format /2
        raise UserError(f"{d}: no index (run 'raycrawl index build {d}' first)")
    try:
        return FragmentIndex.load(idx)
    except (ValueError, OSError, KeyError) as e:
        raise UserError(f"{idx}: unreadable index ({e}); rebuild it with 'raycrawl index build'") from e


def run_query(index, query: str, k: int = 10, any_term: bool = False, version: int | None = None):
    """(hits, query terms, stats) — UserError for a query without terms or an unknown epoch."""
    from raycrawl.tasks.query import QueryProcessor
    from raycrawl.text import terms

    qterms = terms(query, is_html=False)
    if not qterms:
        raise UserError(f"query {query!r} has no searchable words (only stopwords or punctuation)")
    if version is not None and version not in index.epochs:
        raise UserError(f"--version {version}: the index holds epochs {index.epochs}")
    if k < 1:
        raise UserError("--top must be >= 1")
    qp = QueryProcessor(index)
    hits = qp.search(qterms, k=k, mode="or" if any_term else "and", epoch=version)
    return hits, qterms, qp.last_stats


def format_hits(hits, qterms: list[str], seconds: float) -> str:
    lines = [f"{len(hits)} result(s) for {' '.join(qterms)} ({seconds * 1000:.1f} ms)"]
    for rank, h in enumerate(hits, 1):
        extra = []
        if h.pagerank is not None:
            extra.append(f"pagerank {h.pagerank:.3g}")
        if h.spam is not None:
            extra.append(f"spam {h.spam:.2f}")
        lines.append(f"{rank:3d}. {h.score:7.3f}  {h.url}" + (f"  ({', '.join(extra)})" if extra else ""))
        lines.append("       versions: " + ", ".join(f"epoch {v.epoch} {v.score:.3f}" for v in h.versions))
    return "\n".join(lines)


def run_temporal(index, index_dir: Path, query: str, e1: int, e2: int, k: int, method: str, alpha: float,
                 hits_c: float | None = None):
    """Temporal search between epochs e1 and e2 of an index built from several crawls."""
    from raycrawl.tasks.temporal_search import temporal_search
    from raycrawl.text import terms

    qterms = terms(query, is_html=False)
    if not qterms:
        raise UserError(f"query {query!r} has no searchable words (only stopwords or punctuation)")
    for e in (e1, e2):
        if e not in index.epochs:
            raise UserError(f"--temporal {e}: the index holds epochs {index.epochs}")
    if not 0 <= alpha <= 1:
        raise UserError("--alpha must be in [0, 1]")
    if hits_c is not None and not hits_c >= 0:
        raise UserError(f"--hits-c must be >= 0, got {hits_c}")
    stats_file = index_dir / "stats.json"
    crawls = json.loads(stats_file.read_text()).get("crawls", []) if stats_file.exists() else []
    from raycrawl.storage.crawl_epochs import parse_view

    if len(crawls) <= max(e1, e2) or not all(parse_view(crawls[e])[0].is_dir() for e in (e1, e2)):
        raise UserError(f"{index_dir}: the crawl directories of epochs {e1} and {e2} are not available")
    return temporal_search(index, crawls, qterms, e1, e2, k=k, alpha=alpha, method=method, hits_c=hits_c), qterms


def handle(args: argparse.Namespace) -> int:
    index = open_index(args.dir)
    if args.temporal:
        (top, edges), qterms = run_temporal(index, crawl_index_dir(args.dir), args.query, *args.temporal, args.k, args.method,
                                            args.alpha, args.hits_c)
        if args.json:
            print(json.dumps({"terms": qterms, "results": [
                {"url": h.url, "score": h.score, "ir": h.ir, "change": h.change} for h in top],
                "edges": [[index.urls[u], index.urls[v]] for u, v in edges]}, indent=2))
        else:
            print(f"{len(top)} result(s) for {' '.join(qterms)} between epochs {args.temporal[0]} and "
                  f"{args.temporal[1]} ({args.method})")
            for rank, h in enumerate(top, 1):
                print(f"{rank:3d}. {h.score:.4f}  {h.url}  (BM25 {h.ir:.3f}, change {h.change:.3f})")
            print(f"  {len(edges)} link(s) among them")
        return 0
    hits, qterms, stats = run_query(index, args.query, args.k, args.any, args.version)
    dt = stats.seconds  # the query itself, not the text pipeline's first-use imports
    if args.json:
        print(json.dumps({"terms": qterms, "seconds": dt, "results": [
            {"url": h.url, "score": h.score, "pagerank": h.pagerank, "spam": h.spam,
             "versions": [{"epoch": v.epoch, "score": v.score} for v in h.versions]} for h in hits]}, indent=2))
    else:
        print(format_hits(hits, qterms, dt))
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Query the demo crawl's index (built by the index stage just before) with its most frequent
    2 terms."""
    index = open_index(Path(crawl_dir))
    from raycrawl.tasks.query import QueryProcessor

    # The two terms in most fragments (already stems: queried as is, not re-stemmed).
    common = sorted(index.dictionary, key=lambda t: -index.dictionary[t][2])[:2]
    t0 = time.perf_counter()
    hits = QueryProcessor(index).search(common, k=5)
    return format_hits(hits, common, time.perf_counter() - t0)
