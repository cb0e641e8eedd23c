"""Train a focus policy on an archive, run it live, compare with the simulator (issue 18, seeds 000/001).

1. A breadth-first crawl of a served websim web is the archive: graph and summaries are built
   from it (``raycrawl graph build``'s and ``raycrawl summaries build``'s code).
2. ``raycrawl simulate`` trains the topic classifier (naive Bayes on ``--train`` labelled pages)
   and replays BFS and best-first over the archive with ``--budget`` pages and ``--front`` back
   queues; it writes the two models (``bfs.focus.json``, ``best-first.focus.json``).
3. ``raycrawl crawl --focus MODEL --max-pages BUDGET --front-size FRONT`` crawls the same web
   live with each model, from the same seeds.
4. Harvest rates by ground truth (the pages' topics in websim's manifest), live and simulated,
   side by side; every live fetch is also checked against websim's request log (politeness audit).

The simulator's back queues and the live front are the same number (``--front``): Mercator's B,
the hosts visited at once. ``--runs`` live crawls per policy (different draws of the front-queue
selector) give the spread.

    .venv/bin/python benchmarks/focus_live.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _crawl import crawl_cli  # noqa: E402 - benchmarks/ is on the path when run as a script


def crawl(env, web, out: Path, *extra: str, host_delay: float, ip_delay: float) -> dict:
    return crawl_cli(env, web, out, "--seeds", str(web.seeds_file), *extra, host_delay=host_delay, ip_delay=ip_delay)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=600)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--pages", type=float, default=20.0, help="mean pages per host")
    ap.add_argument("--seed", type=int, default=11, help="websim seed")
    ap.add_argument("--topic-rank", type=int, default=4, help="the topic: k-th most frequent (0 = largest)")
    ap.add_argument("--budget", type=int, default=600, help="pages per crawl (live) and per replay")
    ap.add_argument("--front", type=int, default=8, help="back queues (simulated) = front size (live)")
    ap.add_argument("--train", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3, help="live crawls per policy")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    args = ap.parse_args()

    from raycrawl.commands import simulate as simulate_cmd
    from raycrawl.storage.crawl_graph import build_crawl_graph
    from raycrawl.tasks.focus_harvest import fetch_order, harvest_curve
    from raycrawl.tasks.simulate import read_url_labels
    from raycrawl.tasks.summaries_build import build as build_summaries
    from raycrawl.websim import Websim
    from raycrawl.websim.audit import audit

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        with Websim(hosts=args.hosts, ips=args.ips, seed=args.seed, pages_per_host_mean=args.pages, clean=True,
                    out_dir=tmp / "web") as web:
            labels = read_url_labels(web.manifest_path)
            t0 = time.time()
            archive = tmp / "archive"
            rep = crawl(env, web, archive, host_delay=0.02, ip_delay=0.005)
            build_crawl_graph(archive)
            build_summaries(archive, min_df=3)
            print(f"archive: BFS crawl of websim {args.hosts} hosts / {args.ips} IPs (seed {args.seed}, clean): "
                  f"{rep['pages']:,} pages in {time.time() - t0:.0f} s; graph and summaries built")
            fetched_labels = Counter(labels.get(r.url) for r in fetch_order(archive))
            topic = [t for t, _ in fetched_labels.most_common() if t is not None][args.topic_rank]
            share = fetched_labels[topic] / sum(fetched_labels.values())
            print(f"topic {topic!r}: {fetched_labels[topic]:,} of the archive's pages ({share:.1%})")
            sim_out = tmp / "sim"
            summary = simulate_cmd.run(archive, f"topic:{topic}", ["bfs", "best-first"], args.budget,
                                       truth=web.manifest_path, train=args.train, back_queues=args.front,
                                       out=sim_out, seeds=",".join(web.seeds_file.read_text().split()))
            sim = {p: v["harvest_rate"] for p, v in summary["policies"].items()}
            live: dict[str, list[float]] = {"bfs": [], "best-first": []}
            audits = []
            for run in range(args.runs):
                for policy in ("bfs", "best-first"):
                    out = tmp / f"live-{policy}-{run}"
                    web.flush_log()
                    t1 = time.time()
                    crawl(env, web, out, "--focus", str(sim_out / f"{policy}.focus.json"), "--max-pages",
                          str(args.budget), "--front-size", str(args.front), host_delay=args.host_delay,
                          ip_delay=args.ip_delay)
                    web.flush_log()
                    recs = fetch_order(out)
                    pages, rel = harvest_curve(recs, lambda r: labels.get(r.url) == topic)
                    live[policy].append(float(rel[-1] / pages[-1]))
                    a = audit([r for r in web.requests() if r.start >= t1], web.manifest, args.host_delay,
                              args.ip_delay)
                    audits.append(len(a.violations))
                    print(f"  live {policy:>10} run {run}: {len(recs)} pages, harvest {live[policy][-1]:.3f}, "
                          f"{time.time() - t1:.0f} s, audit violations {len(a.violations)}")
        print(f"\nharvest rate after {args.budget} pages (ground truth: websim topics), front = back queues = {args.front}")
        print(f"{'policy':>12} {'live (median, range)':>26} {'simulated':>10} {'live / sim':>11}")
        for policy in ("bfs", "best-first"):
            xs = np.array(live[policy])
            print(f"{policy:>12} {np.median(xs):>12.3f} ({xs.min():.3f}–{xs.max():.3f}) {sim[policy]:>10.3f} "
                  f"{np.median(xs) / max(sim[policy], 1e-9):>11.2f}")
        ratio_live = np.median(live["best-first"]) / max(np.median(live["bfs"]), 1e-9)
        print(f"best-first / BFS: live {ratio_live:.2f}×, simulated {sim['best-first'] / max(sim['bfs'], 1e-9):.2f}×; "
              f"politeness violations over all live crawls: {sum(audits)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
