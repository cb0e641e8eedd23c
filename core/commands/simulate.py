"""``raycrawl simulate``: replay focused crawls over a crawl's graph and summaries (no network).

    raycrawl simulate DIR --relevance SPEC [--policy bfs,best-first] [--budget N] [--truth FILE]

Writes the harvest curves and, per policy, the model ``<policy>.focus.json`` that
``raycrawl crawl --focus`` runs live (docs/focused-crawling.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.policies.front_queues import DEFAULT_BIAS

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="simulate focused crawls on the stored graph + summaries",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="crawl directory with graph/ (or links/) and summaries/")
    p.add_argument("--relevance", required=True, metavar="SPEC",
                   help="terms:W1,W2[@K] (term query) or topic:LABEL (labels from --truth, naive Bayes)")
    p.add_argument("--policy", default="bfs,best-first", help="comma list of bfs, best-first (default both)")
    p.add_argument("--budget", type=int, default=100_000, help="pages to fetch per policy (default 100000)")
    p.add_argument("--seeds", default="", help="comma list of seed URLs or node ids (default: the crawl's first 5)")
    p.add_argument("--truth", type=Path, help="url<TAB>label file: ground truth for topic:LABEL")
    p.add_argument("--train", type=int, default=200, help="labelled pages the topic classifier learns from")
    p.add_argument("--levels", type=int, default=10, help="front queues (priority levels) for best-first")
    p.add_argument("--bias", type=float, default=DEFAULT_BIAS,
                   help=f"front-queue bias: level l is drawn with weight bias**l (default {DEFAULT_BIAS:g})")
    p.add_argument("--back-queues", type=int, default=64, help="Mercator back queues (hosts in flight)")
    p.add_argument("--delay", type=float, default=4.0, help="simulated host delay, in fetch times")
    p.add_argument("--seed", type=int, default=0, help="random seed (training sample)")
    p.add_argument("--out", type=Path, help="output directory (default DIR/simulate)")
    p.set_defaults(func=_run)


def run(crawl_dir: Path, relevance: str, policies: list[str], budget: int, seeds: str = "",
        truth: Path | None = None, train: int = 200, levels: int = 10, back_queues: int = 64,
        delay: float = 4.0, seed: int = 0, out: Path | None = None, bias: float = DEFAULT_BIAS) -> dict:
    """Run the simulations and write ``harvest.{tsv,json,png}``; returns the JSON summary."""
    from raycrawl.storage.summaries import SummaryArchive
    from raycrawl.tasks import relevance as rel_mod
    from raycrawl.tasks import simulate as sim

    crawl_dir = Path(crawl_dir)
    if not crawl_dir.is_dir():
        raise UserError(f"{crawl_dir}: no such crawl directory")
    for p in policies:
        if p not in sim.POLICIES:
            raise UserError(f"unknown policy {p!r} (use {', '.join(sim.POLICIES)})")
    if levels < 1 or back_queues < 1 or delay < 0 or budget < 1:
        raise UserError("--levels, --back-queues, --budget must be ≥ 1 and --delay ≥ 0")
    if not bias >= 1:
        raise UserError("--bias must be ≥ 1 (1: no preference among levels)")
    archive = SummaryArchive.open(crawl_dir)
    coll = sim.load_collection(crawl_dir)
    if coll.num_nodes != archive.num_nodes:
        raise UserError(f"archive has {archive.num_nodes} nodes but the graph {coll.num_nodes}: "
                        "rebuild the archive (raycrawl summaries build)")
    decoded = archive.decode_all()
    labels = sim.read_labels(truth, coll) if truth else None
    rel = rel_mod.from_spec(relevance, decoded, coll.num_nodes, list(archive.terms), archive.term_id,
                            labels, train, seed)
    if seeds:
        seed_ids = []
        for s in seeds.split(","):
            v = int(s) if s.isdigit() else coll.id_of(s)
            if v is None or not 0 <= v < coll.num_nodes:
                raise UserError(f"seed {s!r} is not a node of this crawl")
            seed_ids.append(v)
    else:
        seed_ids = sim.default_seeds(crawl_dir, coll)
    curves = [sim.simulate(coll, rel, p, budget, seed_ids, levels=levels, bias=bias, back_queues=back_queues,
                           delay=delay, seed=seed) for p in policies]
    return sim.write_results(curves, rel, out or crawl_dir / "simulate")


def _run(args) -> int:
    from raycrawl.tasks.simulate import format_summary

    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    summary = run(args.dir, args.relevance, policies, args.budget, args.seeds, args.truth, args.train,
                  args.levels, args.back_queues, args.delay, args.seed, args.out, args.bias)
    print(format_summary(summary))
    out = args.out or args.dir / "simulate"
    print(f"-> {out}/harvest.{{tsv,json,png}}; models {', '.join(f'{out}/{p}.focus.json' for p in policies)}")
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """BFS vs best-first on the demo crawl (needs ``DIR/summaries/``: the summaries stage).

    With websim's manifest beside the crawl (``DIR/../websim/``), relevance is a websim topic
    (ground truth) and the classifier naive Bayes; otherwise a term query on a term found in
    5–30 % of the pages.
    """
    from collections import Counter

    from raycrawl.storage.summaries import SummaryArchive
    from raycrawl.tasks.simulate import format_summary, load_collection, read_labels

    crawl_dir = Path(crawl_dir)
    archive = SummaryArchive.open(crawl_dir)
    manifest = crawl_dir.parent / "websim" / "manifest.jsonl.gz"
    if manifest.exists():
        labels = read_labels(manifest, load_collection(crawl_dir))
        counts = Counter(lab for lab in labels.tolist() if lab is not None)
        topics = [t for t, c in counts.most_common() if c >= 10]
        if topics:
            topic = topics[min(3, len(topics) - 1)]
            # 8 back queues: on a web this small, 64 hosts at once leave priorities little to choose
            # (docs/focused-crawling.md)
            summary = run(crawl_dir, f"topic:{topic}", ["bfs", "best-first"], budget=max(archive.num_nodes // 4, 1),
                          truth=manifest, train=min(200, archive.documents // 4), back_queues=8)
            return format_summary(summary) + f"\n-> {crawl_dir / 'simulate'}/harvest.{{tsv,json,png}}"
    n = max(archive.documents, 1)
    frac = archive.df / n
    cands = [i for i in range(len(archive.terms)) if 0.05 <= frac[i] <= 0.3] or [0]
    term = archive.terms[cands[0]]
    summary = run(crawl_dir, f"terms:{term}", ["bfs", "best-first"], budget=max(archive.num_nodes // 4, 1))
    return format_summary(summary) + f"\n-> {crawl_dir / 'simulate'}/harvest.{{tsv,json,png}}"
