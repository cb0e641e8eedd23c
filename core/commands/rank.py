"""``raycrawl rank``: PageRank, CheiRank, 2DRank and κ of a crawl's graph or of any BV graph.

``raycrawl rank DIR`` reads the crawl's graph ``DIR/graph/bv.*`` (and its URL map) and writes
``DIR/ranks.parquet``, ``DIR/rank.json``, ``DIR/rank-density.png`` (and ``DIR/ranks.tsv`` with
``--format tsv``); ``raycrawl rank --graph BASENAME --out DIR`` does the same for any WebGraph BV
graph. See docs/ranking.md.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from raycrawl.argtypes import crawl_dir, non_negative_float
from raycrawl.errors import UserError
from raycrawl.tasks.rank_run import run_rank

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "rank",
        help="PageRank, CheiRank, 2DRank and the correlator kappa of a crawl's graph or a BV graph",
        description="Power-iterate the Google matrix (alpha, dangling columns 1/N) of the graph and of "
        "its reverse; write ranks.parquet (node url pagerank cheirank K Kstar K2), rank.json, "
        "rank-density.png and print the top nodes (see docs/ranking.md).",
    )
    p.add_argument("dir", type=crawl_dir, nargs="?", help="crawl output directory (reads DIR/graph/bv.*)")
    p.add_argument("--graph", metavar="BASENAME", help="rank this WebGraph BV graph instead of a crawl's")
    p.add_argument("--out", type=Path, help="output directory (default DIR; required with --graph)")
    p.add_argument("--alpha", type=float, default=0.85, help="damping factor α, 0 < α < 1 (default 0.85)")
    p.add_argument("--tol", type=float, default=1e-10, help="stop when the L1 change is below this (default 1e-10)")
    p.add_argument("--max-iter", type=int, default=1000, help="iteration cap (default 1000)")
    p.add_argument(
        "--personalize",
        type=Path,
        metavar="FILE",
        help="personalization vector: lines 'NODE_OR_URL [WEIGHT]' (weight 1 if omitted, '#' comments)",
    )
    p.add_argument("--format", choices=("parquet", "tsv"), default="parquet", help="also write ranks.tsv with 'tsv'")
    p.add_argument("--distributed", action="store_true", help="run each iteration as Ray tasks over row blocks")
    p.add_argument("--blocks", type=int, default=2, help="row blocks (Ray tasks per iteration) with --distributed")
    p.add_argument("--threads", type=int, default=None,
                   help="kernel threads for the single-process path (default: all cores if idle, else 1)")
    p.add_argument("--address", default=None, help="Ray cluster address for --distributed (default: local)")
    p.add_argument("--hits", type=non_negative_float, default=None, metavar="C",
                   help="also compute personalized HITS with supersource weight C (authority/hub columns)")
    p.add_argument("--spectrum", type=int, default=0, metavar="K",
                   help="also compute invariant subspaces and the K top core eigenvalues at α=1 (slow)")
    p.add_argument("--arnoldi-dim", type=int, default=None, metavar="N_A",
                   help="Arnoldi dimension n_A for the core eigenvalues (default 200; the paper uses 6000, "
                        "which needs n_A x core nodes x 8 bytes of memory)")
    p.add_argument("--top", type=int, default=10, help="how many top nodes to print (default 10)")
    p.add_argument("--no-png", action="store_true", help="skip the density plot")
    p.set_defaults(func=handle)


def report_text(rs, summary: dict, url_of, top: int = 10) -> str:
    """What the command prints: sizes, iterations, κ, then the top-k listings."""
    from raycrawl.tasks.rank_output import format_top

    pr, cr = summary["pagerank"], summary["cheirank"]
    lines = [
        f"graph {summary['graph']}: N={summary['N']:,} arcs={summary['arcs']:,} dangling={summary['dangling']:,}"
        f"{' (personalized)' if summary['personalized'] else ''}",
        f"PageRank: {pr['iterations']} iterations, {pr['seconds_per_iteration'] * 1e3:.2f} ms/iteration, "
        f"final L1 residual {pr['residuals'][-1]:.2e}" if pr["residuals"] else "PageRank: empty graph",
        f"CheiRank: {cr['iterations']} iterations, {cr['seconds_per_iteration'] * 1e3:.2f} ms/iteration, "
        f"final L1 residual {cr['residuals'][-1]:.2e}" if cr["residuals"] else "CheiRank: empty graph",
        f"kappa = {summary['kappa']:.4f}  (alpha={summary['alpha']}, tol={summary['tol']:g}, "
        f"{'distributed, ' + str(summary['blocks']) + ' blocks' if summary['distributed'] else 'single process'})",
    ]
    for key, name in (("spectrum", "G"), ("spectrum_star", "G*")):
        if key in summary:
            s = summary[key]
            core = ", ".join(f"{abs(complex(*z)):.6f}" for z in s["core_top"][:5]) or "none converged"
            lines.append(f"spectrum of {name} (alpha=1): N_s={s['N_s']} N_d={s['N_d']} d_max={s['d_max']} N_1={s['N_1']} "
                         f"N_circ={s['N_circ']} (lambda=1 found: {s['unit_eigenvalues_found']}; n_A={s['n_arnoldi']}); "
                         f"top core |lambda|: {core}")
    if top:
        lines.append(format_top(rs, url_of, top))
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    if args.graph:
        if args.dir is not None and args.out is None:
            args.out = args.dir
        if args.out is None:
            raise UserError("--graph needs --out DIR")
        basename = Path(args.graph)
        out = args.out
    else:
        if args.dir is None:
            raise UserError("give a crawl directory DIR or --graph BASENAME --out DIR")
        if not args.dir.is_dir():
            raise UserError(f"{args.dir} is not a directory")
        from raycrawl.storage.crawl_graph import graph_paths

        basename = graph_paths(args.dir)["graph"]
        if not Path(str(basename) + ".properties").exists():
            raise UserError(f"no graph in {args.dir} ({basename}.properties missing): run `raycrawl graph` first")
        out = args.out or args.dir
    rs, summary, url_of = run_rank(
        basename, out, alpha=args.alpha, tol=args.tol, max_iter=args.max_iter, personalize=args.personalize,
        fmt=args.format, distributed=args.distributed, blocks=args.blocks, address=args.address,
        threads=args.threads, hits=args.hits,
        spectrum=args.spectrum, arnoldi_dim=args.arnoldi_dim, top=args.top, png=not args.no_png,
    )
    print(report_text(rs, summary, url_of, args.top))
    print(f"wrote {out / 'ranks.parquet'}{', ranks.tsv' if args.format == 'tsv' else ''}, rank.json"
          f"{'' if args.no_png else ', rank-density.png'}")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """The demo's rank stage: rank ``crawl_dir``'s graph, write the outputs there, return the report."""
    crawl_dir = Path(crawl_dir)
    from raycrawl.storage.crawl_graph import graph_paths

    rs, summary, url_of = run_rank(graph_paths(crawl_dir)["graph"], crawl_dir, top=5)
    return report_text(rs, summary, url_of, top=5)
