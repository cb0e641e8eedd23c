"""``raycrawl index build DIR``: the redundancy-aware fragment index of a crawl's pages and versions.

``raycrawl index build DIR [--crawl OLDER ...] [--policy local|global|none] [-w 100] [-b 5]``
indexes every 200 HTML page of the crawls, oldest first: each ``--crawl`` directory in the order
given, then DIR itself (the i-th crawl is epoch i; a periodic crawl revisited by ``crawl --revisit``
gives one epoch per pass). The index lands in ``DIR/index/`` (or ``--out``).
``raycrawl index stats DIR`` prints what an index holds. See docs/search.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import index_dir, layout


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "index",
        help="build / inspect the fragment index of one or several crawls (versions of pages)",
        description="Cut every page version into winnowing fragments and index each distinct fragment "
        "once under the sharing policy (see docs/search.md).",
    )
    sub = p.add_subparsers(dest="index_cmd", required=True)
    b = sub.add_parser("build", help="build DIR/index from DIR (and older crawls given with --crawl)")
    b.add_argument("dir", type=crawl_dir, help="crawl output directory (the newest epoch); the index goes to DIR/index")
    b.add_argument("--crawl", type=Path, action="append", default=[], metavar="OLDER_DIR",
                   help="an older crawl of the same web, repeatable, oldest first (epochs 0, 1, …; DIR comes last)")
    b.add_argument("--policy", choices=("global", "local", "none"), default="global",
                   help="fragment sharing: across all pages (global, default), across a page's versions "
                   "(local) or not at all (none: a standard index)")
    b.add_argument("-w", "--window", type=int, default=100, dest="w", help="winnowing window in words (default 100)")
    b.add_argument("-b", "--gram", type=int, default=5, dest="b", help="words per winnowing hash (default 5)")
    b.add_argument("--out", type=Path, default=None, help="index directory (default DIR/index)")
    b.set_defaults(func=handle_build)
    s = sub.add_parser("stats", help="print the sizes of an index as JSON")
    s.add_argument("dir", type=crawl_dir, help="crawl directory holding index/ (or an index directory)")
    s.set_defaults(func=handle_stats)


def _check_crawl(d: Path) -> None:
    if not d.is_dir():
        raise UserError(f"{d}: no such crawl directory")
    if not (layout(d).warc).is_dir() or not (layout(d).links).is_dir():
        raise UserError(f"{d}: not a crawl output directory (needs warc/ and links/)")


def build(crawl_dir: Path, older: list[Path] | None = None, policy: str = "global", w: int = 100, b: int = 5,
          out: Path | None = None) -> dict:
    """Build and save the index; returns its stats (plus ``seconds`` and ``index_dir``)."""
    from raycrawl.storage.crawl_epochs import view_name, views
    from raycrawl.tasks.index_build import build_index, crawl_versions, page_scores

    if w < 1 or b < 1 or b > w:
        raise UserError(f"need 1 ≤ --gram ≤ --window (a window holds at least one whole gram), got -b {b} -w {w}")
    crawls = [*(older or []), crawl_dir]
    for d in crawls:
        _check_crawl(d)
    t0 = time.perf_counter()
    snippets: dict[str, str] = {}
    captures: dict = {}
    crawl_views = views(crawls)
    versions = crawl_versions(crawl_views, snippets, captures)
    if not versions:
        raise UserError(f"{crawl_dir}: no HTML pages with status 200 to index")
    pr, spam = page_scores(crawl_dir)
    index = build_index(versions, policy, b, w, pr, spam, snippets, captures)
    out = out or layout(crawl_dir).index
    index.save(out)
    stats = dict(index.stats, seconds=round(time.perf_counter() - t0, 2), index_dir=str(out),
                 crawls=[view_name(v.dir.resolve(), v.epoch) for v in crawl_views])
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def describe(stats: dict) -> str:
    """Human summary of an index's stats (the Table 6.1 numbers of one policy)."""
    return (f"index ({stats['policy']} sharing, w={stats['w']}, b={stats['b']}): {stats['pages']} pages, "
            f"{stats['versions']} versions, {len(stats.get('crawls', [])) or '?'} crawl(s)\n"
            f"  fragments {stats['fragments']:,} of {stats['fragments_total']:,} "
            f"({stats['fragments'] / max(1, stats['fragments_total']):.3f}); positions {stats['positions']:,} of "
            f"{stats['positions_total']:,} ({stats['positions'] / max(1, stats['positions_total']):.3f})\n"
            f"  {stats['terms']:,} terms, {stats['postings']:,} postings, {stats['postings_bytes']:,} bytes of "
            f"var-byte postings, {stats['reused_fragments']:,} fragments reused across pages")


def handle_build(args: argparse.Namespace) -> int:
    stats = build(args.dir, args.crawl, args.policy, args.w, args.b, args.out)
    print(describe(stats))
    print(f"  written: {stats['index_dir']} in {stats['seconds']} s")
    return 0


def handle_stats(args: argparse.Namespace) -> int:
    d = index_dir(args.dir)
    if not (d / "stats.json").exists():
        raise UserError(f"{args.dir}: no index (run 'raycrawl index build {args.dir}' first)")
    print((d / "stats.json").read_text(), end="")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Index the demo crawl (global sharing) and return the summary plus a sample 2-term search."""
    from raycrawl.commands.search import demo_stage as search_demo

    return describe(build(Path(crawl_dir))) + "\n" + search_demo(Path(crawl_dir))
