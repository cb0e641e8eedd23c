"""``raycrawl log DIR``: the crawl log (storage/crawl_log.py) as Heritrix's crawl.log, TSV or parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "log", help="the per-URL crawl log: Heritrix crawl.log lines, a TSV table or parquet",
        description="One row per URL the crawl visited (time, status, size, URL, discovery path, via, MIME, "
        "digest, WARC file and offset, duplicate-of…), from the link records of DIR, in fetch-time order. "
        "--format heritrix (default) prints Heritrix's crawl.log format, tsv a table with a header line, "
        "parquet writes DIR/crawl-log.parquet (or -o FILE). See docs/archiving.md.")
    p.add_argument("dir", type=crawl_dir, help="crawl directory")
    p.add_argument("--format", choices=("heritrix", "tsv", "parquet"), default="heritrix")
    p.add_argument("-o", "--out", type=Path, help="output file (default: stdout; DIR/crawl-log.parquet for parquet)")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from raycrawl.storage import crawl_log
    from raycrawl.storage.crawl_dir import layout

    if not layout(args.dir).links.is_dir():
        raise UserError(f"not a crawl directory (no links/): {args.dir}")
    if args.format == "parquet":
        out = args.out or args.dir / "crawl-log.parquet"
        n = crawl_log.write_parquet(args.dir, out)
        print(f"{n} rows written to {out}", file=sys.stderr)
    elif args.out:
        n = crawl_log.write_text(args.dir, args.out, args.format)
        print(f"{n} rows written to {args.out}", file=sys.stderr)
    else:
        crawl_log.write_lines(args.dir, sys.stdout, args.format)
    return 0
