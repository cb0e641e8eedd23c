"""Pages/s with 1, 2 and 3 agents on this one machine, same websim, budget, delays and robots rules.

Each run is ``raycrawl crawl --agents K`` (embedded Redis, local Ray) in its own process session; CPU
seconds are summed over every process of the session (Ray workers and Redis included), and each
run's slice of websim's request log is audited (host/IP politeness, robots, URLs fetched twice).
The machine has 2 cores, so more agents cannot mean more speed here; what this measures is the
cost of an agent: pages/s, CPU s per page and the efficiency (pages/s per CPU-second of the
whole crawl) relative to one agent — on a cluster each agent brings its own node.

    .venv/bin/python benchmarks/scaling.py                     # 400 hosts / 40 IPs, 2000 pages
    .venv/bin/python benchmarks/scaling.py --agents 1,2 --pages 1000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from crawl_vs_scrapy import run_session, window_stats  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=400)
    ap.add_argument("--ips", type=int, default=40)
    ap.add_argument("--pages", type=int, default=2000, help="page budget of each run")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--agents", default="1,2,3")
    args = ap.parse_args()

    from raycrawl.websim import Websim

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=args.ips, seed=3, clean=True,
                                                      out_dir=Path(tmp) / "web") as web:
        for k in [int(x) for x in args.agents.split(",")]:
            cmd = [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
                   str(Path(tmp) / f"crawl-{k}"), "--resolve", str(web.hosts_file), "--allow-networks",
                   "127.0.0.0/8", "--host-delay", str(args.host_delay), "--ip-delay", str(args.ip_delay),
                   "--max-pages", str(args.pages), "--max-urls-per-host", "1000", "--agents", str(k)]
            t0 = time.time()
            wall, series, rc = run_session(cmd, env)
            web.flush_log()
            st = window_stats(web, t0, time.time(), series, args.host_delay, args.ip_delay)
            st.update(agents=k, wall_s=round(wall, 1), cpu_s=round(series[-1][1], 1), exit=rc)
            rows.append(st)
            print(st, file=sys.stderr)
    print(f"websim {args.hosts} hosts / {args.ips} IPs, budget {args.pages} pages per run, host delay "
          f"{args.host_delay} s, IP delay {args.ip_delay} s, {os.cpu_count()} cores")
    print(f"{'agents':>6} {'pages':>6} {'steady pages/s':>15} {'CPU ms/page':>12} {'to 1st req s':>13} "
          f"{'wall s':>7} {'CPU s':>7}  violations")
    for r in rows:
        print(f"{r['agents']:>6} {r['pages']:>6} {r['steady_pages_per_s']:>15} {r.get('cpu_ms_per_page', 0):>12} "
              f"{r.get('to_first_request_s', 0):>13} {r['wall_s']:>7} {r['cpu_s']:>7}  "
              f"{r['violations']}{'' if r['exit'] == 0 else '  EXIT ' + str(r['exit'])}")


if __name__ == "__main__":
    main()
