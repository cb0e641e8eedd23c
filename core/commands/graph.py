"""``raycrawl graph build|stats|export|import``: the compressed web graph of a crawl (docs/graph.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout

if TYPE_CHECKING:
    import numpy as np


def _bv_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=int, default=7, help="BV reference window (default 7, WebGraph's)")
    p.add_argument("--max-ref", type=int, default=3, help="longest reference chain (default 3)")
    p.add_argument("--min-interval", type=int, default=4, help="shortest interval; 0 disables (default 4)")
    p.add_argument("--zeta", type=int, default=3, help="k of the zeta code for residuals (default 3)")
    p.add_argument("--url-block", type=int, default=None, help="URLs per URL-map block (default 32)")


def register(subparsers) -> None:
    p = subparsers.add_parser("graph", help="build, inspect, export or import the compressed web graph",
                              description="The crawl's web graph in WebGraph BV format plus its URL map "
                              "(see docs/graph.md).")
    sub = p.add_subparsers(dest="graph_cmd", required=True)
    b = sub.add_parser("build", help="build DIR/graph from the crawl's link records")
    b.add_argument("dir", type=crawl_dir, help="crawl output directory (holds links/)")
    _bv_options(b)
    b.set_defaults(func=handle_build)
    s = sub.add_parser("stats", help="nodes, arcs, bits/link and degree distributions of DIR/graph")
    s.add_argument("dir", type=crawl_dir)
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("--png", type=Path, default=None, metavar="FILE",
                   help="where to draw the log-log in- and out-degree distributions (default DIR/graph/degrees.png)")
    s.set_defaults(func=handle_stats)
    e = sub.add_parser("export", help="print one 'src<TAB>dst' line per arc (URLs, or ids without a URL map)")
    e.add_argument("dir", type=crawl_dir)
    e.add_argument("--ids", action="store_true", help="print node ids even when a URL map exists")
    e.set_defaults(func=handle_export)
    i = sub.add_parser("import", help="re-compress a BV graph or an arc list into OUT/graph")
    src = i.add_mutually_exclusive_group(required=True)
    src.add_argument("--bv", help="basename of a WebGraph BV graph (BASENAME.graph/.offsets/.properties)")
    src.add_argument("--arcs", type=Path, help="text file, one 'src<TAB>dst' arc per line ('-' for stdin)")
    i.add_argument("--numeric", action="store_true", help="--arcs endpoints are integer node ids (no URL map)")
    i.add_argument("--out", type=Path, required=True, help="output directory (graph written to OUT/graph)")
    _bv_options(i)
    i.set_defaults(func=handle_import)


def _params(args: argparse.Namespace) -> dict[str, int]:
    for name in ("window", "min_interval"):
        if getattr(args, name) < 0:
            raise UserError(f"--{name.replace('_', '-')} must be >= 0")
    if args.max_ref < 1 or args.zeta < 1:
        raise UserError("--max-ref and --zeta must be >= 1")
    if args.url_block is not None and args.url_block < 1:
        raise UserError("--url-block must be >= 1")
    return {"window": args.window, "max_ref_count": args.max_ref, "min_interval": args.min_interval,
            "zeta_k": args.zeta}


def _print_info(info: dict) -> None:
    print(f"graph: {info['nodes']:,} nodes, {info['arcs']:,} arcs, {info['bits_per_link']:.3f} bits/link "
          f"(transpose {info['transpose_bits_per_link']:.3f}), built in {info['seconds']:.2f} s")
    if "urlmap_bytes_per_url" in info:
        print(f"url map: {info['urlmap_bytes_per_url']:.2f} bytes/URL")


def handle_build(args: argparse.Namespace) -> int:
    from raycrawl.storage.crawl_graph import build_crawl_graph, graph_paths

    if not (layout(args.dir).links).is_dir():
        raise UserError(f"{args.dir} has no links/ directory: not a crawl output directory")
    info = build_crawl_graph(args.dir, url_block_size=args.url_block, **_params(args))
    _print_info(info)
    print(f"  written: {graph_paths(args.dir)['dir']}/")
    return 0


def _load(crawl_dir: Path):
    """(paths, graph, transpose, URL map or None) of a crawl's graph (storage/crawl_graph.py
    opens and checks it)."""
    from raycrawl.storage.crawl_graph import graph_paths, open_crawl_graph

    return graph_paths(crawl_dir), *open_crawl_graph(crawl_dir)


def degree_summary(deg) -> dict:
    import numpy as np

    if len(deg) == 0:
        return {"mean": 0.0, "max": 0, "zero": 0, "percentiles": {}, "log2_histogram": {}}
    hist: dict[str, int] = {}
    zero = int((deg == 0).sum())
    if zero:
        hist["0"] = zero
    pos = deg[deg > 0]
    if len(pos):
        buckets = np.floor(np.log2(pos)).astype(int)
        for b, c in zip(*np.unique(buckets, return_counts=True), strict=True):
            hist[f"{2**b}-{2 ** (b + 1) - 1}"] = int(c)
    return {"mean": round(float(deg.mean()), 3), "max": int(deg.max()), "zero": zero,
            "percentiles": {str(q): float(np.percentile(deg, q)) for q in (50, 90, 99)},
            "log2_histogram": hist}


def graph_stats(crawl_dir: Path, loaded: tuple | None = None) -> dict:
    """The statistics ``graph stats`` prints (``loaded``: what :func:`_load` returned, if at hand)."""
    paths, g, t, m = loaded or _load(crawl_dir)
    out = g.outdegrees()
    stats = {"nodes": g.num_nodes, "arcs": g.num_arcs, "bits_per_link": round(g.bits_per_link, 3),
             "outdegree": degree_summary(out), "transpose_bits_per_link": round(t.bits_per_link, 3),
             "indegree": degree_summary(t.outdegrees())}
    if m is not None:
        stats["urlmap_bytes_per_url"] = round(m.size_bytes / len(m), 3) if len(m) else 0.0
        stats["urlmap_block_size"] = m.block_size
    return stats


def handle_stats(args: argparse.Namespace) -> int:
    loaded = _load(args.dir)
    paths, g, t, _ = loaded
    s = graph_stats(args.dir, loaded)
    png = args.png or paths["dir"] / "degrees.png"
    try:
        write_degree_png(g.outdegrees(), t.outdegrees(), png)
    except OSError as exc:
        print(f"raycrawl graph stats: warning: {png} not written ({exc.strerror or exc})", file=sys.stderr)
        png = None
    if args.json:
        print(json.dumps({**s, "png": str(png) if png else None}, indent=2))
        return 0
    print(format_stats(s))
    if png:
        print(f"degree distributions: {png}")
    return 0


def degree_frequencies(deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(k, number of nodes of degree k) for every degree k ≥ 1 that occurs."""
    import numpy as np

    counts = np.bincount(deg.astype(np.int64))
    ks = np.nonzero(counts)[0]
    ks = ks[ks > 0]
    return ks, counts[ks]


def write_degree_png(outdeg: np.ndarray, indeg: np.ndarray, path: Path) -> Path:
    """The in- and out-degree distributions on log-log axes (nodes of degree 0 cannot be drawn
    there: the legend counts them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    for deg, name, marker in ((indeg, "in-degree", "o"), (outdeg, "out-degree", "s")):
        ks, n = degree_frequencies(deg)
        zero = int((deg == 0).sum())
        ax.loglog(ks, n, marker, ms=3, alpha=0.7, label=f"{name} (mean {deg.mean():.1f}; {zero:,} nodes at 0)")
    ax.set_xlabel("degree k")
    ax.set_ylabel("nodes of degree k")
    ax.set_title(f"degree distributions: {len(outdeg):,} nodes, {int(outdeg.sum()):,} arcs", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def format_stats(s: dict) -> str:
    lines = [f"nodes {s['nodes']:,}  arcs {s['arcs']:,}  bits/link {s['bits_per_link']:.3f}"
             + (f"  (transpose {s['transpose_bits_per_link']:.3f})" if "transpose_bits_per_link" in s else "")]
    if "urlmap_bytes_per_url" in s:
        lines.append(f"url map {s['urlmap_bytes_per_url']:.2f} bytes/URL (blocks of {s['urlmap_block_size']})")
    for name in ("outdegree", "indegree"):
        if name in s:
            d = s[name]
            pct = " ".join(f"p{q}={v:g}" for q, v in d["percentiles"].items())
            lines.append(f"{name}: mean {d['mean']:.2f}, max {d['max']}, zero {d['zero']:,}, {pct}")
            lines.append("  " + "  ".join(f"[{k}] {v:,}" for k, v in d["log2_histogram"].items()))
    return "\n".join(lines)


def handle_export(args: argparse.Namespace) -> int:
    paths, g, _, m = _load(args.dir)
    names = None
    if m is not None and not args.ids:
        names = list(m)
    indptr, indices = g.to_csr()
    write = sys.stdout.write
    try:
        for v in range(g.num_nodes):
            succ = indices[indptr[v] : indptr[v + 1]].tolist()
            if not succ:
                continue
            if names is None:
                write("".join(f"{v}\t{d}\n" for d in succ))
            else:
                src = names[v]
                write("".join(f"{src}\t{names[d]}\n" for d in succ))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
    return 0


def _text_lines(f, path: Path):
    """(line number, line) of a text file; a file that is not UTF-8 text is a UserError."""
    lineno = 0
    try:
        for lineno, line in enumerate(f, 1):  # noqa: B007 - read by the except clause
            yield lineno, line
    except UnicodeDecodeError:
        raise UserError(f"{path}:{lineno + 1}: not UTF-8 text (a binary file?)") from None


def _read_arcs(path: Path, numeric: bool):
    import numpy as np

    fh = sys.stdin if str(path) == "-" else None
    try:
        f = fh or open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from e
    src: list = []
    dst: list = []
    with f:
        for lineno, line in _text_lines(f, path):
            line = line.rstrip("\n").rstrip("\r")
            if not line or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                raise UserError(f"{path}:{lineno}: expected 'src<TAB>dst', got {line[:80]!r}")
            if numeric:
                if not (parts[0].isdigit() and parts[1].isdigit()):
                    raise UserError(f"{path}:{lineno}: --numeric needs non-negative integer ids, got {line[:80]!r}")
                src.append(int(parts[0]))
                dst.append(int(parts[1]))
            else:
                src.append(parts[0])
                dst.append(parts[1])
    if numeric:
        s = np.array(src, dtype=np.int64)
        d = np.array(dst, dtype=np.int64)
        n = int(max(s.max(), d.max()) + 1) if len(s) else 0
        return None, s, d, n
    from raycrawl.storage.urlmap import url_sort_key

    urls = sorted(set(src) | set(dst), key=url_sort_key)
    ids = {u: i for i, u in enumerate(urls)}
    return urls, np.array([ids[u] for u in src], dtype=np.int64), np.array([ids[u] for u in dst], dtype=np.int64), len(urls)


def handle_import(args: argparse.Namespace) -> int:
    import numpy as np

    from raycrawl.storage.bvgraph import BVGraph
    from raycrawl.storage.crawl_graph import graph_paths, write_graph_dir

    params = _params(args)
    if args.bv:
        g = BVGraph.load(args.bv)
        indptr, indices = g.to_csr()
        src = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(indptr))
        info = write_graph_dir(args.out, None, src, indices, num_nodes=g.num_nodes,
                               extra={"source": str(args.bv)}, **params)
    else:
        if args.url_block is not None and args.numeric:
            raise UserError("--url-block makes no sense with --numeric (no URL map)")
        urls, src, dst, n = _read_arcs(args.arcs, args.numeric)
        info = write_graph_dir(args.out, urls, src, dst, num_nodes=n, url_block_size=args.url_block,
                               extra={"source": str(args.arcs)}, **params)
    _print_info(info)
    print(f"  written: {graph_paths(args.out)['dir']}/")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Build the demo crawl's graph and return what to print: sizes, bits/link, degrees, and a
    URL map round trip on the first node."""
    import numpy as np

    from raycrawl.storage.crawl_graph import build_crawl_graph

    info = build_crawl_graph(crawl_dir)
    text = format_stats(graph_stats(Path(crawl_dir)))
    paths, g, _, m = _load(Path(crawl_dir))
    if info["nodes"] and m is not None:
        v = int(np.argmax(g.outdegrees()))
        succ = g.successors(v)
        text += (f"\nnode {v} = {m.url_of(v)} (id_of gives {m.id_of(m.url_of(v))}) links to {len(succ)} pages, "
                 f"e.g. {m.url_of(int(succ[0])) if len(succ) else '-'}")
    return text + f"\n  written: {paths['dir']}/"
