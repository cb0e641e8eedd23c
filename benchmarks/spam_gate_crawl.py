"""The crawl-time spam gate measured on a real crawl (issue 16): `raycrawl crawl` of a served websim
with the gate on and off, pages counted from websim's request log, spam labels from its manifest.

The gate is trained as benchmarks/spam.py trains it (a crawl-order pass over a labelled web, seed
``--seed``) and crawls another web (``--gate-seed``; websim's full profile, as its clean one has no
spam), served on loopback. Both crawls run to an empty frontier with default settings but the
politeness delays and a 3 s read timeout (the web's hang hosts); the gate's query terms are the
training web's (a live crawl knows no other). Reported: HTML pages fetched from spam and honest hosts, the share of spam pages the gate
saved, the share of honest pages it cost, and the honest hosts that lost pages (an upper bound of
the honest hosts it blocked: a host may also lose pages linked only from a blocked one). The BFS
simulation of the same web (tasks/spam_websim.simulate_gated_crawl, benchmarks/spam.py's
headline) is printed beside it.

    .venv/bin/python benchmarks/spam_gate_crawl.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def html_pages_by_host(web, t0: float, t1: float) -> Counter[str]:
    """Successful page requests (robots.txt left out) per host in websim's log slice [t0, t1]."""
    return Counter(r.host.split(":")[0] for r in web.requests()
                   if t0 <= r.start <= t1 and r.status == 200 and "robots.txt" not in r.target)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--ips", type=int, default=300)
    ap.add_argument("--pages", type=float, default=10.0, help="mean pages per host")
    ap.add_argument("--seed", type=int, default=3, help="websim seed of the labelled (training) web")
    ap.add_argument("--gate-seed", type=int, default=4, help="websim seed of the web the gate crawls")
    ap.add_argument("--sample-pages", type=int, default=2, help="pages the gate sees before deciding")
    ap.add_argument("--host-delay", type=float, default=0.05)
    ap.add_argument("--ip-delay", type=float, default=0.01)
    args = ap.parse_args()

    from raycrawl.policies.spam_gate import SHINGLE_FEATURES, GateModel, SpamGate, train_gate
    from raycrawl.tasks.spam_features import LOCAL_FEATURES
    from raycrawl.tasks.spam_websim import (
        gate_training_rows,
        manifest_labels,
        model_labels,
        simulate_gated_crawl,
    )
    from raycrawl.websim import Websim
    from raycrawl.websim.model import WebModel

    train = WebModel.generate(hosts=args.hosts, ips=args.ips, seed=args.seed, pages_per_host_mean=args.pages)
    gm = train_gate(gate_training_rows(train, frozenset(train.vocab.popular_terms)), model_labels(train),
                    sample_pages=args.sample_pages, query_terms=list(train.vocab.popular_terms),
                    features=list(LOCAL_FEATURES + SHINGLE_FEATURES))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        gate_file = gm.save(Path(tmp) / "gate.json")
        other = WebModel.generate(hosts=args.hosts, ips=args.ips, seed=args.gate_seed,
                                  pages_per_host_mean=args.pages)
        sim_off = simulate_gated_crawl(other, None)
        sim_on = simulate_gated_crawl(other, SpamGate(GateModel.load(gate_file)))
        counts = {}
        with Websim(hosts=args.hosts, ips=args.ips, seed=args.gate_seed, pages_per_host_mean=args.pages,
                    out_dir=Path(tmp) / "web") as web:
            labels = manifest_labels(web.manifest_path)
            for name, extra in (("off", []), ("on", ["--spam-gate", str(gate_file)])):
                web.flush_log()
                t0 = time.time()
                proc = subprocess.run(
                    [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
                     str(Path(tmp) / f"crawl-{name}"), "--resolve", str(web.hosts_file), "--allow-networks",
                     "127.0.0.0/8", "--host-delay", str(args.host_delay), "--ip-delay", str(args.ip_delay),
                     "--max-urls-per-host", "1000", "--read-timeout", "3", "--max-retries", "1", *extra], env=env, capture_output=True, text=True, cwd=ROOT)
                if proc.returncode:
                    print(proc.stderr[-3000:], file=sys.stderr)
                    return 1
                web.flush_log()
                counts[name] = html_pages_by_host(web, t0, time.time())
    spam = {h for h, y in labels.items() if y}

    def split(c: Counter[str]) -> tuple[int, int]:
        return sum(n for h, n in c.items() if h in spam), sum(n for h, n in c.items() if h not in spam)

    (s_off, h_off), (s_on, h_on) = split(counts["off"]), split(counts["on"])
    if not s_off:
        print("no page of a spam host was fetched without the gate: nothing to measure", file=sys.stderr)
        return 1
    hurt = sorted(h for h in counts["off"] if h not in spam and counts["on"][h] < counts["off"][h])
    honest_hosts = sum(1 for h in counts["off"] if h not in spam)
    print(f"websim {args.hosts} hosts / {args.ips} IPs (seed {args.gate_seed}; {len(spam)} spam hosts); "
          f"gate trained on seed {args.seed}: {len(gm.features)} features, decides after {gm.sample_pages} pages, "
          f"threshold {gm.threshold:.3f}")
    print(f"{'':34s} {'gate off':>9s} {'gate on':>9s}   {'BFS simulation off / on':>24s}")
    print(f"{'pages from spam hosts':34s} {s_off:>9d} {s_on:>9d}   {sim_off['spam_pages']:>11d} / {sim_on['spam_pages']}")
    print(f"{'pages from honest hosts':34s} {h_off:>9d} {h_on:>9d}   {sim_off['honest_pages']:>11d} / {sim_on['honest_pages']}")
    print(f"spam pages saved: {100 * (1 - s_on / max(1, s_off)):.1f} % (simulation "
          f"{100 * (1 - sim_on['spam_pages'] / max(1, sim_off['spam_pages'])):.1f} %); honest pages lost: "
          f"{100 * (1 - h_on / max(1, h_off)):.2f} % (simulation "
          f"{100 * (1 - sim_on['honest_pages'] / max(1, sim_off['honest_pages'])):.2f} %)")
    print(f"honest hosts that lost pages: {len(hurt)} of {honest_hosts} ({100 * len(hurt) / max(1, honest_hosts):.2f} %; "
          f"simulation: {sim_on['blocked_honest']} honest hosts blocked of {sim_off['honest_hosts']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
