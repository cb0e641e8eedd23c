"""Temporal spam features (seed 003 §3, §5.3, §6): held-out AUC per feature set with confidence
intervals over repeated splits, feature counts, and the time each set takes — the paper's Tables
10/11 and §6 in their shape, on an evolving websim.

    .venv/bin/python benchmarks/spam_temporal.py                       # 1000 hosts, epochs 0..2, 5 splits
    .venv/bin/python benchmarks/spam_temporal.py --hosts 600 --splits 3 --epochs 2

Data: websim's web at epochs 0..E (link farms rewire a quarter of their cross-host links per epoch,
honest hosts 3 %, on top of page edits; websim/model.py), each written as a complete crawl
(``tasks/spam_websim.write_model_crawl``: the ``links/`` and ``warc/`` a crawl stores), then
``raycrawl spam features`` and ``raycrawl spam temporal`` on them. Labels: websim's spam roles.
Train/test: whole IP/registered-domain groups (tasks/spam_model.group_split), one split per seed;
AUC mean and a 95 % interval (t distribution over the splits). The paper's numbers are UK2007 with
eight monthly snapshots; ours are a synthetic web with E+1 snapshots: the sizes of the gains, not
the values, are what can be compared.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Table 10 (ensemble selection) of seed 003, UK2007: feature set -> (number of features, AUC)
PAPER = {"link": (176, 0.759), "growth_death": (29, 0.617), "xjac+psim": (63, 0.625),
         "link+growth_death": (205, 0.758), "link+xjac+psim": (239, 0.769)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--ips", type=int, default=300)
    ap.add_argument("--pages", type=float, default=10.0, help="mean pages per host")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2, help="last epoch (snapshots 0..E)")
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--fingerprints", type=int, default=100)
    ap.add_argument("--dir", type=Path, default=None, help="keep the crawls here (default: temporary)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from scipy import sparse

    from raycrawl.tasks.spam_model import evaluate, host_groups
    from raycrawl.tasks.spam_pipeline import feature_data, load_features, write_features
    from raycrawl.tasks.spam_temporal import fill_missing
    from raycrawl.tasks.spam_temporal_pipeline import temporal_features
    from raycrawl.tasks.spam_websim import model_labels, write_model_crawl
    from raycrawl.websim.model import WebModel

    tmp = tempfile.TemporaryDirectory()
    root = args.dir or Path(tmp.name)
    dirs, t_static = [], 0.0
    for k in range(args.epochs + 1):
        web = WebModel.generate(hosts=args.hosts, ips=args.ips, seed=args.seed, epoch=k, pages_per_host_mean=args.pages)
        d = root / f"epoch{k}"
        write_model_crawl(web, d)
        t0 = time.perf_counter()
        write_features(d, frozenset(web.vocab.popular_terms))
        t_static = time.perf_counter() - t0  # the last snapshot's static features (what one crawl costs)
        dirs.append(d)
    labels = model_labels(web)
    res = temporal_features(dirs, args.fingerprints, seed=0, content=True)
    table, terms = load_features(dirs[-1])
    hosts = table.column("host").to_pylist()
    y = np.array([labels[h] for h in hosts])
    groups = host_groups(hosts, table.column("ip").to_pylist())
    data, _ = feature_data(table, terms)
    row = {h: i for i, h in enumerate(res["hosts"])}
    idx = np.array([row.get(h, -1) for h in hosts])
    for name, feats in res["link"].items():
        cols = [fill_missing(np.where(idx >= 0, v[np.maximum(idx, 0)], np.nan), k) for k, v in feats.items()]
        data[name] = np.column_stack(cols)
    c_hosts, vocab, cgroups, _ = res["content"]
    crow = {h: i for i, h in enumerate(c_hosts)}
    pick = sparse.csr_matrix((np.ones(len(hosts)), (np.arange(len(hosts)), [crow.get(h, 0) for h in hosts])),
                             shape=(len(hosts), len(c_hosts)))
    pick = sparse.diags([1.0 if h in crow else 0.0 for h in hosts]) @ pick
    data["temporal_content"] = (pick @ sparse.hstack([cgroups[g] for g in cgroups]).tocsr()).tocsr()
    data["xjac+psim"] = np.hstack([data["xjaccard"], data["psimrank"]])
    data["temporal_link"] = np.hstack([data["growth_death"], data["xjac+psim"]])
    data["link+growth_death"] = np.hstack([data["link"], data["growth_death"]])
    data["link+xjac+psim"] = np.hstack([data["link"], data["xjac+psim"]])
    data["link+temporal_link"] = np.hstack([data["link"], data["temporal_link"]])
    catalog = {
        "link": ["link"], "growth_death": ["growth_death"], "xjaccard": ["xjaccard"], "psimrank": ["psimrank"],
        "xjac+psim": ["xjac+psim"], "link+growth_death": ["link+growth_death"], "link+xjac+psim": ["link+xjac+psim"],
        "content": ["content"], "bm25": ["bm25"], "temporal_content": ["temporal_content"],
        "content+temporal_content": ["content", "temporal_content"],
        "all static": ["content", "link", "bm25"],
        "all static+temporal": ["content", "link", "bm25", "temporal_link", "temporal_content"],
    }
    seconds = {**res["seconds"], "static (content+link+bm25 inputs, one crawl)": t_static}
    print(f"websim {args.hosts} hosts (seed {args.seed}), snapshots = epochs 0..{args.epochs}; {len(hosts)} hosts in "
          f"the last, {int(y.sum())} spam, {groups.max() + 1} IP/domain groups; temporal content vocabulary "
          f"{len(vocab)} terms; {args.splits} group splits")
    t0 = time.perf_counter()
    out = evaluate(data, y, groups, catalog, seeds=tuple(range(args.splits)), quick=True)
    print(f"(training + selection: {time.perf_counter() - t0:.0f} s)\n")
    from scipy import stats

    print(f"{'feature set':28s} {'#features':>9s} {'AUC':>6s} {'95% CI':>15s} {'paper #':>8s} {'paper AUC':>9s}")
    for name, r in out.items():
        aucs = np.array(r["aucs"])
        half = stats.t.ppf(0.975, len(aucs) - 1) * aucs.std(ddof=1) / np.sqrt(len(aucs)) if len(aucs) > 1 else float("nan")
        nf = sum(data[s].shape[1] for s in catalog[name])
        pn, pa = PAPER.get(name, ("-", None))
        lo, hi = max(0.0, aucs.mean() - half), min(1.0, aucs.mean() + half)  # an AUC lies in [0, 1]
        print(f"{name:28s} {nf:9d} {aucs.mean():6.3f} {lo:7.3f}–{hi:.3f} "
              f"{pn!s:>8s} {pa if pa is None else f'{pa:.3f}'!s:>9s}")
    print("\nseconds to compute each feature set (§6), all snapshot pairs:")
    for k, v in seconds.items():
        print(f"  {k:48s} {v:8.2f}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
