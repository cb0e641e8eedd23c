"""``raycrawl summaries``: build, read and measure the archive of summaries of a crawl (seed 000).

    raycrawl summaries build DIR [--min-df 20] [--code PART=CODE ...] [--from-spill]
    raycrawl summaries get DIR NODE|URL [--json]
    raycrawl summaries stats DIR [--json]
    raycrawl summaries sub DIR NAME [--host HOST ...] [--ids FILE]
    raycrawl summaries merge OUT ARCHIVE... [--min-df 1]
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)



def register(subparsers) -> None:
    p = subparsers.add_parser("summaries", help="archive of summaries (doc lengths and term counts)",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="summaries_command", metavar="ACTION", required=True)

    b = sub.add_parser("build", help="build DIR/summaries/ from the WARC files of a finished crawl")
    b.add_argument("dir", type=crawl_dir, help="crawl directory")
    b.add_argument("--min-df", type=int, default=20, help="drop terms in fewer documents (default 20)")
    b.add_argument("--code", action="append", default=[], metavar="PART=CODE",
                   help="code for length|size|term_gap|count_gap: gamma, delta, unary, zetaK "
                        "(defaults length=delta size=zeta3 term_gap=zeta2 count_gap=gamma)")
    b.add_argument("--from-spill", action="store_true",
                   help="build from the summary writers' spill files instead of re-reading the WARCs")
    b.set_defaults(func=_build)

    g = sub.add_parser("get", help="length and term counts (original terms) of one document")
    g.add_argument("dir", type=crawl_dir)
    g.add_argument("node", help="node id, or a URL of the crawl")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=_get)

    s = sub.add_parser("stats", help="sizes: bits per summary, per pair, pointer bits, dictionary")
    s.add_argument("dir", type=crawl_dir)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_stats)

    u = sub.add_parser("sub", help="save a sub-archive (a subset of node ids) over the archive")
    u.add_argument("dir", type=crawl_dir)
    u.add_argument("name")
    u.add_argument("--host", action="append", default=[], help="keep the pages of this host")
    u.add_argument("--ids", type=Path, help="file of node ids, one per line")
    u.set_defaults(func=_sub)

    m = sub.add_parser("merge", help="merge per-agent archives (same node ids) into OUT/summaries/")
    m.add_argument("out", type=Path, help="output directory (gets summaries/)")
    m.add_argument("archives", type=Path, nargs="+", help="crawl or summaries directories to merge")
    m.add_argument("--min-df", type=int, default=1, help="drop terms in fewer documents, over all archives")
    m.add_argument("--code", action="append", default=[], metavar="PART=CODE", help="as for build")
    m.set_defaults(func=_merge)


# -- node ids -------------------------------------------------------------------------------------


def _parse_codes(specs: list[str]) -> dict[str, str]:
    from raycrawl.storage.summaries import DEFAULT_CODES, parse_code

    codes = {}
    for spec in specs:
        part, _, code = spec.partition("=")
        if part not in DEFAULT_CODES or not code:
            raise UserError(f"bad --code {spec!r}: use PART=CODE with PART in {', '.join(DEFAULT_CODES)}")
        parse_code(code)
        codes[part] = code
    return codes


def _build(args) -> int:
    from raycrawl.tasks.summaries_build import build

    props = build(args.dir, args.min_df, _parse_codes(args.code), args.from_spill)
    print(f"{props['documents']} summaries of {props['nodes']} nodes, {props['terms']} terms "
          f"(min_df {props['min_df']}), {props['total_bits'] / max(props['documents'], 1):.1f} bits/summary "
          f"-> {args.dir / 'summaries'}")
    return 0


def _get(args) -> int:
    from raycrawl.storage.crawl_graph import node_map
    from raycrawl.storage.summaries import SummaryArchive

    archive = SummaryArchive.open(args.dir)
    url = None
    if args.node.isdigit():
        node = int(args.node)
    else:
        id_of, _, _, _ = node_map(args.dir)
        url, node = args.node, id_of(args.node)
        if node is None:
            raise UserError(f"{args.node}: not a URL of this crawl")
    if not 0 <= node < archive.num_nodes:
        raise UserError(f"node {node} outside [0, {archive.num_nodes})")
    s = archive.get(node)
    if s is None:
        print(json.dumps({"node": node, "missing": True}) if args.json else f"node {node}: no summary")
        return 1
    pairs = sorted(((archive.term(t), int(c)) for t, c in zip(s.term_ids.tolist(), s.counts.tolist(),
                                                               strict=True)), key=lambda p: (-p[1], p[0]))
    if args.json:
        print(json.dumps({"node": node, "url": url, "length": s.length, "size": s.size, "terms": dict(pairs)}))
    else:
        print(f"node {node}{' ' + url if url else ''}: length {s.length} words, {s.size} terms")
        for term, count in pairs:
            print(f"{count}\t{term}")
    return 0


def format_stats(st: dict) -> str:
    lines = [
        f"nodes {st['nodes']}, summaries {st['documents']}, missing {st['missing']}",
        f"dictionary {st['terms']} terms (min_df {st['min_df']}), {st['pairs']} term/count pairs",
        f"codes {st['codes']}",
        f"{st['bits_per_summary']:.2f} bits/summary, {st['bits_per_pair']:.2f} bits/pair",
        "  per summary: " + ", ".join(f"{k} {v:.2f}" for k, v in st["bits_by_part_per_summary"].items()),
        f"pointers {st['pointer_bits_per_summary']:.2f} bits/summary (Elias–Fano); "
        f"missing set {st['missing_bits_per_node']:.3f} bits/node",
        f"data {st['data_bytes']} bytes",
    ]
    return "\n".join(lines)


def _stats(args) -> int:
    from raycrawl.storage.summaries import SummaryArchive

    st = SummaryArchive.open(args.dir).stats()
    print(json.dumps(st, indent=1) if args.json else format_stats(st))
    return 0


def _sub(args) -> int:
    from raycrawl.storage.crawl_graph import node_map
    from raycrawl.storage.summaries import SubArchive, SummaryArchive
    from raycrawl.urls import host_of

    archive = SummaryArchive.open(args.dir)
    nodes: set[int] = set()
    if args.ids:
        try:
            nodes.update(int(x) for x in args.ids.read_text().split())
        except (OSError, ValueError) as exc:
            raise UserError(f"--ids {args.ids}: {exc}") from None
    if args.host:
        _, url_of, n, _ = node_map(args.dir)
        hosts = {h.lower() for h in args.host}
        nodes.update(i for i in range(n) if host_of(url_of(i)) in hosts)
    if not args.ids and not args.host:
        raise UserError("give --ids FILE and/or --host HOST")
    sub = SubArchive.create(archive, args.name, nodes)
    present = sum(1 for i in sub.ids.to_array().tolist() if i in archive)
    print(f"sub-archive {args.name}: {len(sub)} nodes ({present} with summaries)")
    return 0


def _merge(args) -> int:
    from raycrawl.storage.summaries import DEFAULT_BASENAME, SummaryArchive, merge_archives

    if args.min_df < 1:
        raise UserError(f"--min-df must be ≥ 1, got {args.min_df}")
    archives = [SummaryArchive.open(p) for p in args.archives]
    props = merge_archives(archives, layout(args.out).summaries / DEFAULT_BASENAME, args.min_df, _parse_codes(args.code))
    print(f"merged {len(archives)} archives: {props['documents']} summaries of {props['nodes']} nodes, "
          f"{props['terms']} terms -> {args.out / 'summaries'}")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Build the archive of the demo crawl and return its stats plus one sample summary."""
    from raycrawl.storage.summaries import SummaryArchive
    from raycrawl.tasks.summaries_build import build

    build(Path(crawl_dir), min_df=5)  # a demo crawl is small: the paper's 20 would drop most terms
    archive = SummaryArchive.open(crawl_dir)
    out = [format_stats(archive.stats())]
    ids = archive.node_ids()
    if len(ids):
        s = archive.get(int(ids[0]))
        top = sorted(zip(s.term_ids.tolist(), s.counts.tolist(), strict=True), key=lambda p: -p[1])[:8]
        out.append(f"node {int(ids[0])}: length {s.length}, {s.size} terms; top: "
                   + ", ".join(f"{archive.term(t)}×{c}" for t, c in top))
    return "\n".join(out)
