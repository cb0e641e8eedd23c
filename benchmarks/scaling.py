"""Pages/s and CPU per page with 1, 2 and 4 agents, same websim, budget, delays and robots rules.

Each run is ``raycrawl crawl --agents K`` in its own process session; CPU seconds are summed over
every process of the session (Ray's, the workers', Redis) over the steady window (the 10th to the
90th percentile of page responses, crawl_vs_scrapy.window_stats), and each run's slice of websim's
request log is audited (host/IP politeness, robots, URLs fetched twice). With ``--cluster`` (the
default) the session starts a ``ray.cluster_utils.Cluster`` of K agent nodes plus a head, so each
agent has a node of its own as on cloud VMs (``--local``: K agents in one local Ray instead).

The machine has 2 cores, so more agents cannot mean more speed here; what this measures is the
work an agent costs: CPU ms per page should not grow with K (issue 16), and pages/s, whatever the
cores allow. On the cluster, the session first idles 5 s: the CPU rate of the idle cluster (each
node's raylet, the GCS, Ray's agents) is paid per node and per second, not per page, and "net CPU
ms/page" subtracts it over the steady window ("to 1st req" includes the cluster's start and that
pause).

    .venv/bin/python benchmarks/scaling.py                     # 1000 hosts / 100 IPs, 5000 pages, K = 1,2,4
    .venv/bin/python benchmarks/scaling.py --agents 1,2 --pages 2000 --local
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

from crawl_vs_scrapy import cpu_at, run_session, window_stats  # noqa: E402

# Run in the measured session: a Cluster of K agent nodes (and a head that holds no agent), then the
# crawl CLI joined to it.
ON_CLUSTER = """
import sys
from ray.cluster_utils import Cluster
k, IDLE_FILE, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
IDLE_S = 5.0
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
for _ in range(k):
    cluster.add_node(num_cpus=1, resources={"agent": 1})
cluster.wait_for_nodes()
import time
from pathlib import Path
t0 = time.time()
time.sleep(IDLE_S)  # the cluster's own background CPU, before the crawl starts
Path(IDLE_FILE).write_text(f"{t0} {time.time()}")
from raycrawl.cli import main
try:
    rc = main([*argv, "--address", cluster.address])
finally:
    cluster.shutdown()
sys.exit(rc)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--pages", type=int, default=5000, help="page budget of each run")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--agents", default="1,2,4")
    ap.add_argument("--local", action="store_true", help="K agents in one local Ray instead of a Cluster of K nodes")
    args = ap.parse_args()

    from raycrawl.websim import Websim

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=args.ips, seed=3, clean=True,
                                                      out_dir=Path(tmp) / "web") as web:
        for k in [int(x) for x in args.agents.split(",")]:
            crawl = ["crawl", "--seeds", str(web.seeds_file), "--out",
                   str(Path(tmp) / f"crawl-{k}"), "--resolve", str(web.hosts_file), "--allow-networks",
                   "127.0.0.0/8", "--host-delay", str(args.host_delay), "--ip-delay", str(args.ip_delay),
                   "--max-pages", str(args.pages), "--max-urls-per-host", "1000", "--agents", str(k)]
            idle_file = Path(tmp) / f"idle-{k}"
            cmd = ([sys.executable, "-m", "raycrawl", *crawl] if args.local
                   else [sys.executable, "-c", ON_CLUSTER, str(k), str(idle_file), *crawl])
            t0 = time.time()
            wall, series, rc = run_session(cmd, env)
            web.flush_log()
            st = window_stats(web, t0, time.time(), series, args.host_delay, args.ip_delay)
            st.update(agents=k, wall_s=round(wall, 1), cpu_s=round(series[-1][1], 1), exit=rc)
            if idle_file.exists() and st.get("cpu_ms_per_page"):
                # What the idle cluster burns (raylets, GCS, agents' processes) is paid per node, not
                # per page: subtract its rate over the steady window for the per-page work.
                a, b = map(float, idle_file.read_text().split())
                rate = (cpu_at(series, b) - cpu_at(series, a)) / (b - a)
                pages = st["steady_pages_per_s"] * st["steady_s"]
                st["idle_cores"] = round(rate, 3)
                st["net_cpu_ms_per_page"] = round(st["cpu_ms_per_page"] - 1000 * rate * st["steady_s"] / pages, 2)
            rows.append(st)
            print(st, file=sys.stderr)
    print(f"websim {args.hosts} hosts / {args.ips} IPs (clean), budget {args.pages} pages per run, host delay "
          f"{args.host_delay} s, IP delay {args.ip_delay} s, {os.cpu_count()} cores, "
          f"{'one local Ray' if args.local else 'a Cluster node per agent'}")
    print(f"{'agents':>6} {'pages':>6} {'steady pages/s':>15} {'CPU ms/page':>12} {'idle cores':>11} "
          f"{'net CPU ms/page':>16} {'to 1st req s':>13} {'wall s':>7} {'CPU s':>7}  violations")
    for r in rows:
        print(f"{r['agents']:>6} {r['pages']:>6} {r['steady_pages_per_s']:>15} {r.get('cpu_ms_per_page', 0):>12} "
              f"{r.get('idle_cores', '-'):>11} {r.get('net_cpu_ms_per_page', '-'):>16} "
              f"{r.get('to_first_request_s', 0):>13} {r['wall_s']:>7} {r['cpu_s']:>7}  "
              f"{r['violations']}{'' if r['exit'] == 0 else '  EXIT ' + str(r['exit'])}")


if __name__ == "__main__":
    main()
