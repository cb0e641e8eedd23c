"""``raycrawl warc index DIR``: the CDXJ index replay tools read (storage/cdxj.py), optionally with
the crawl's WARC files linked into a pywb collection; ``raycrawl warc wacz DIR``: the crawl as one
WACZ file (storage/wacz.py); ``raycrawl warc wet DIR``: its pages' text as WET files (storage/wet.py); ``raycrawl warc wat DIR``: its records' metadata
as WAT files (storage/wat.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("warc", help="WARC tools: the CDXJ index for pywb replay, WACZ packages, WET and WAT files",
                              description="Tools over a crawl's WARC files (docs/archiving.md).")
    sub = p.add_subparsers(dest="warc_command", metavar="SUBCOMMAND", required=True)
    ix = sub.add_parser(
        "index", help="write the CDXJ index of a crawl's WARC files (DIR/indexes/index.cdxj)",
        description="Index every capture (response and revisit records) of DIR/warc/ into a sorted CDXJ file, "
        "the format pywb replays from. With --pywb COLLECTION (a pywb collection directory, "
        "e.g. collections/mycrawls) the WARC files are linked into COLLECTION/archive/ and the index written "
        "as COLLECTION/indexes/NAME.cdxj (NAME: the crawl directory's name), so `wayback` replays the crawl "
        "without `wb-manager reindex`; several crawls can share one collection.")
    ix.add_argument("dir", type=crawl_dir, help="crawl directory")
    ix.add_argument("-o", "--out", type=Path, help="index file (default DIR/indexes/index.cdxj)")
    ix.add_argument("--pywb", type=Path, metavar="COLLECTION", help="a pywb collection directory to add the crawl to")
    ix.add_argument("--not-modified", action="store_true",
                    help="index the 304 (server-not-modified) revisits of periodic passes too; pywb replays them as "
                    "304 with no body, so they are left out by default")
    ix.set_defaults(func=handle_index)
    wz = sub.add_parser(
        "wacz", help="package a crawl as one WACZ file (for ReplayWeb.page, pywb, Browsertrix users)",
        description="Write the crawl's WARC files, their CDXJ index, the list of its pages and a data package "
        "with every file's SHA-256 into one WACZ 1.1.1 file (storage/wacz.py).")
    wz.add_argument("dir", type=crawl_dir, help="crawl directory")
    wz.add_argument("-o", "--out", type=Path, help="WACZ file to write (default DIR/NAME.wacz, NAME: the directory's name)")
    wz.add_argument("--title", help="the collection's title (default: the directory's name)")
    wz.set_defaults(func=handle_wacz)
    wt = sub.add_parser(
        "wet", help="write the crawl's HTML pages as plain text in WET files (Common Crawl's layout: DIR/wet/)",
        description="For each WARC file DIR/warc/NAME.warc.gz, DIR/wet/NAME.warc.wet.gz: one conversion record "
        "per HTML page answered 200, its main text (resiliparse) and its language (ISO 639-3), as Common "
        "Crawl's WET files are, so code written for them reads the crawl unchanged (storage/wet.py).")
    wt.add_argument("dir", type=crawl_dir, help="crawl directory")
    wt.add_argument("-o", "--out", type=Path, help="directory of the WET files (default DIR/wet)")
    wt.set_defaults(func=handle_wet)
    wa = sub.add_parser(
        "wat", help="write the metadata of the crawl's WARC records as WAT files (Common Crawl's layout: DIR/wat/)",
        description="For each WARC file DIR/warc/NAME.warc.gz, DIR/wat/NAME.warc.wat.gz: one metadata record of "
        "JSON per WARC record (its WARC and HTTP headers, and for an HTML page its title, metas and links with "
        "their paths such as A@/href), as Common Crawl's WAT files are (storage/wat.py).")
    wa.add_argument("dir", type=crawl_dir, help="crawl directory")
    wa.add_argument("-o", "--out", type=Path, help="directory of the WAT files (default DIR/wat)")
    wa.set_defaults(func=handle_wat)
    cc = sub.add_parser(
        "cc-index", help="write the crawl's columnar URL index in Common Crawl's schema, with its WET and WAT files",
        description="DIR/wet and DIR/wat (as `warc wet` and `warc wat`), then DIR/cc-index/table/cc-main/warc/"
        "crawl=NAME/subset=warc|crawldiagnostics|robotstxt/part-00000.parquet: one row per capture with the "
        "columns and types of Common Crawl's cc-index-table, partitioned as theirs, so their published queries "
        "run on it; each row also gives the page's WET and WAT record (storage/cc_index.py).")
    cc.add_argument("dir", type=crawl_dir, help="crawl directory")
    cc.add_argument("--crawl", help="the crawl's name in the crawl= partition (default RAYCRAWL-<DIR's name>)")
    cc.set_defaults(func=handle_cc_index)


def _has_warc(d: Path) -> None:
    from raycrawl.storage.crawl_dir import layout

    if not layout(d).warc.is_dir():
        raise UserError(f"not a crawl directory (no warc/): {d}")


def handle_index(args: argparse.Namespace) -> int:
    from raycrawl.storage.cdxj import write_index
    from raycrawl.storage.crawl_dir import layout
    from raycrawl.storage.warc import warc_files

    _has_warc(args.dir)
    out = args.out
    if args.pywb is not None:
        if out is not None:
            raise UserError("--out and --pywb are exclusive (--pywb writes COLLECTION/indexes/NAME.cdxj)")
        archive = args.pywb / "archive"
        archive.mkdir(parents=True, exist_ok=True)
        for path in warc_files(layout(args.dir).warc):
            link = archive / path.name
            if link.is_symlink() and link.resolve() == path.resolve():
                continue
            if link.exists() or link.is_symlink():
                raise UserError(f"{link} exists and is another file: WARC names must be unique in a collection")
            link.symlink_to(path.resolve())
        out = args.pywb / "indexes" / f"{args.dir.resolve().name}.cdxj"
    path, lines = write_index(args.dir, out, args.not_modified)
    print(f"{lines} captures indexed in {path}")
    return 0


def handle_wacz(args: argparse.Namespace) -> int:
    from raycrawl.storage.wacz import default_path, write_wacz

    _has_warc(args.dir)
    out = args.out or default_path(args.dir)
    package = write_wacz(args.dir, out, args.title)
    print(f"{out}: {len(package['resources'])} files, WACZ {package['wacz_version']}")
    return 0


def handle_wet(args: argparse.Namespace) -> int:
    from raycrawl.storage.crawl_dir import layout
    from raycrawl.storage.wet import write_crawl_wet

    _has_warc(args.dir)
    out = args.out or layout(args.dir).wet
    written = write_crawl_wet(layout(args.dir).warc, out)
    pages = sum(len(records) for records in written.values())
    print(f"{pages} pages in {len(written)} WET files in {out}")
    return 0


def handle_wat(args: argparse.Namespace) -> int:
    from raycrawl.storage.crawl_dir import layout
    from raycrawl.storage.wat import write_crawl_wat

    _has_warc(args.dir)
    out = args.out or layout(args.dir).wat
    written = write_crawl_wat(layout(args.dir).warc, out)
    print(f"{sum(len(records) for records in written.values())} records in {len(written)} WAT files in {out}")
    return 0


def handle_cc_index(args: argparse.Namespace) -> int:
    from raycrawl.storage.cc_index import TABLE, write_cc_index
    from raycrawl.storage.crawl_dir import layout

    _has_warc(args.dir)
    name = args.crawl or f"RAYCRAWL-{args.dir.resolve().name}"
    if not name or "/" in name or "=" in name:
        raise UserError(f"--crawl {name!r}: a name without '/' or '='")
    counts = write_cc_index(args.dir, name)
    print(f"{sum(counts.values())} captures ({', '.join(f'{k} {v}' for k, v in counts.items())}) in "
          f"{args.dir / TABLE / f'crawl={name}'}, with {layout(args.dir).wet} and {layout(args.dir).wat}")
    return 0


def demo_stage(crawl_dir: str | Path) -> str:
    """``raycrawl demo``'s account of the crawl as one WACZ file (written beside its WARC files)."""
    from raycrawl.storage.wacz import default_path, write_wacz

    wacz = default_path(crawl_dir)
    package = write_wacz(crawl_dir, wacz)
    pages = next(r for r in package["resources"] if r["path"] == "pages/pages.jsonl")
    return (f"WACZ {package['wacz_version']}: {wacz} ({wacz.stat().st_size / 1e6:.2f} MB, "
            f"{len(package['resources'])} files; pages.jsonl {pages['bytes']} bytes) — open it in ReplayWeb.page, "
            "or check it with `wacz validate -f`")
