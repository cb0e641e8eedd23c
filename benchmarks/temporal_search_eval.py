"""Temporal search evaluated on an evolving websim (seed 003 part 3): NDCG@10, MRR and recall@15 of
BM25 alone, the seed-set baseline p(u), personalized PageRank and personalized HITS (authority,
hub), over queries whose relevant pages websim's ground truth names.

    .venv/bin/python benchmarks/temporal_search_eval.py                 # 400 hosts, epochs 0 → 2, 40 queries
    .venv/bin/python benchmarks/temporal_search_eval.py --e2 4 --queries 60

Two crawls — websim at epoch 0 and at epoch E2, each written as a complete crawl
(``tasks/spam_websim.write_model_crawl``) — are indexed together (``tasks/index_build``), and
``raycrawl search --temporal 0 1`` ranks pages for each query. Relevance (tasks/temporal_eval.py),
two gradings: **topic** — from websim's latent topics, which no ranker sees: grade 2 for a page on
the query word's topic whose epoch-E2 text has the word, 1 for one on the topic without it
(queries: words of one topic that ≥ 3 on-topic pages have); **change** — grade 2 for a page with
the term that websim changed between the epochs, 1 for one with it that did not change (queries:
≥ 3 pages of each grade), circular for the change-based rankers, kept for continuity. Then the
paper's Fig. 1: NDCG as α moves the seed-set mix from change alone to IR alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PORT = 8080


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=400)
    ap.add_argument("--ips", type=int, default=80)
    ap.add_argument("--pages", type=float, default=12.0, help="mean pages per host")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--e2", type=int, default=2, help="the later epoch")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("-k", type=int, default=10, help="NDCG cut-off")
    ap.add_argument("--alphas", default="0,0.25,0.5,0.75,1", help="α values of the sweep (empty: skip)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from raycrawl.storage.crawl_epochs import views
    from raycrawl.tasks.index_build import build_index, crawl_versions
    from raycrawl.tasks.query import QueryProcessor
    from raycrawl.tasks.spam_websim import write_model_crawl
    from raycrawl.tasks.temporal_eval import (
        grades_for,
        ndcg_at_k,
        recall_at_k,
        reciprocal_rank,
        topic_grades,
        websim_topics,
        websim_truth,
    )
    from raycrawl.tasks.temporal_search import temporal_search
    from raycrawl.websim.model import WebModel

    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    dirs = []
    for e in (0, args.e2):
        web = WebModel.generate(hosts=args.hosts, ips=args.ips, seed=args.seed, epoch=e, pages_per_host_mean=args.pages)
        dirs.append(root / f"e{e}")
        write_model_crawl(web, dirs[-1], PORT)
    index = build_index(crawl_versions(views(dirs)))
    indexed = set(index.urls)
    having, changed = websim_truth(args.hosts, args.ips, args.seed, 0, args.e2, args.pages, PORT)
    having = {t: us & indexed for t, us in having.items()}
    page_topic, term_topic = websim_topics(args.hosts, args.ips, args.seed, args.e2, args.pages, PORT)
    page_topic = {u: t for u, t in page_topic.items() if u in indexed}
    # topic queries: a word of one topic's block that at least 3 on-topic pages have
    topical = sorted(t for t, us in having.items()
                     if t in term_topic and sum(page_topic.get(u) == term_topic[t] for u in us) >= 3 and len(us) <= 300)
    # change queries (as before): terms with at least 3 changed and 3 unchanged pages
    eligible = sorted(t for t, us in having.items()
                      if sum(changed[u] for u in us) >= 3 and sum(not changed[u] for u in us) >= 3 and len(us) <= 300)
    rng = random.Random(args.seed)
    gradings = {
        "topic": (rng.sample(topical, min(args.queries, len(topical))),
                  lambda q: topic_grades(q, having, page_topic, term_topic)),
        "change": (random.Random(args.seed).sample(eligible, min(args.queries, len(eligible))),
                   lambda q: grades_for(q, having, changed)),
    }
    n_changed = sum(changed[u] for u in indexed if u in changed)
    print(f"websim {args.hosts} hosts (seed {args.seed}), epochs 0 → {args.e2}: {len(indexed)} pages indexed, "
          f"{n_changed} changed in between, {len(set(page_topic.values()))} topics; queries: topic grading "
          f"{len(gradings['topic'][0])} (of {len(topical)} eligible terms), change grading "
          f"{len(gradings['change'][0])} (of {len(eligible)})")
    qp = QueryProcessor(index)
    depth = max(15, args.k)
    crawls = [str(d) for d in dirs]

    def ranked(m: str, q: str, alpha: float = 0.5) -> list[str]:
        if m == "bm25":
            return [index.urls[h.page] for h in qp.search([q], k=depth, mode="or", epoch=1)]
        return [h.url for h in temporal_search(index, crawls, [q], 0, 1, k=depth, method=m, alpha=alpha)[0]]

    methods = ["bm25", "baseline", "pagerank", "hits-auth", "hits-hub"]
    for name, (queries, grade) in gradings.items():
        scores = {m: {"ndcg": [], "mrr": [], "recall15": []} for m in methods}
        seconds = dict.fromkeys(methods, 0.0)
        for q in queries:
            grades = grade(q)
            for m in methods:
                t0 = time.perf_counter()
                r = ranked(m, q)
                seconds[m] += time.perf_counter() - t0
                scores[m]["ndcg"].append(ndcg_at_k(r, grades, args.k))
                scores[m]["mrr"].append(reciprocal_rank(r, grades))
                scores[m]["recall15"].append(recall_at_k(r, grades, 15))
        print(f"\n{name} grading, α = 0.5\n{'method':10s} {'NDCG@' + str(args.k):>8s} {'MRR':>6s} {'recall@15':>9s} "
              f"{'ms/query':>9s}")
        for m in methods:
            sc = scores[m]
            print(f"{m:10s} {np.mean(sc['ndcg']):8.3f} {np.mean(sc['mrr']):6.3f} {np.mean(sc['recall15']):9.3f} "
                  f"{1000 * seconds[m] / max(len(queries), 1):9.1f}")
    # the paper's Fig. 1: NDCG@k as the seed-set mix moves from change alone (α = 0) to IR alone (α = 1)
    alphas = [float(a) for a in args.alphas.split(",")] if args.alphas else []
    if alphas:
        sweep = ["baseline", "pagerank", "hits-auth"]
        print(f"\nα sweep (NDCG@{args.k}; p(u) = α·IR/maxIR + (1−α)·change/(change+T)); BM25 alone for reference")
        print(f"{'grading':8s} {'α':>5s} " + " ".join(f"{m:>10s}" for m in sweep) + f" {'bm25':>10s}")
        for name, (queries, grade) in gradings.items():
            bm25 = np.mean([ndcg_at_k(ranked("bm25", q), grade(q), args.k) for q in queries])
            for a in alphas:
                row = [np.mean([ndcg_at_k(ranked(m, q, a), grade(q), args.k) for q in queries]) for m in sweep]
                print(f"{name:8s} {a:5.2f} " + " ".join(f"{v:10.3f}" for v in row) + f" {bm25:10.3f}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
