"""``raycrawl dedup DIR``: near-duplicate clusters of every stored page of a finished crawl."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raycrawl.argtypes import crawl_dir


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "dedup",
        help="cluster the near-duplicate pages of a finished crawl (MinHash + LSH + union-find)",
        description="Cluster every stored page of the crawl in DIR by estimated Jaccard of word "
        "4-shingle sets; writes DIR/dedup/clusters.jsonl, summary.json and report.txt "
        "(see docs/dedup.md).",
    )
    p.add_argument("dir", type=crawl_dir, help="crawl output directory (holds warc/ and links/)")
    p.add_argument("--threshold", type=float, default=0.9, help="estimated Jaccard to call two pages near-duplicates (default 0.9)")
    p.add_argument("--num-perm", type=int, default=128, help="MinHash permutations (default 128)")
    p.add_argument("--bands", type=int, default=16, help="LSH bands (default 16)")
    p.add_argument("--rows", type=int, default=8, help="sketch values per band (default 8; bands × rows ≤ num-perm)")
    p.add_argument("--confirm", choices=("exact", "estimate"), default="exact",
                   help="confirm LSH candidates by exact Jaccard of the shingle sets (default; keeps them in "
                   "memory) or by the sketch estimate")
    p.add_argument("-k", "--shingle", type=int, default=4, dest="k", help="words per shingle (default 4)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default DIR/dedup)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of the report")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from raycrawl.tasks.dedup import cluster_crawl

    summary = cluster_crawl(
        args.dir, args.threshold, args.num_perm, args.bands, args.k, args.out, rows=args.rows, confirm=args.confirm
    )
    out = args.out or args.dir / "dedup"
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print((out / "report.txt").read_text(), end="")
        print(f"  written: {out / 'clusters.jsonl'}")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Run the post-crawl clustering on a demo crawl and return the report to print."""
    from raycrawl.tasks.dedup import cluster_crawl

    cluster_crawl(crawl_dir)
    return (Path(crawl_dir) / "dedup" / "report.txt").read_text()
