"""What elasticity costs: a full websim crawl on a ``ray.cluster_utils.Cluster`` whose agent nodes
change mid-crawl, next to the same crawl on a fixed cluster, in the same run.

Runs (each on a fresh cluster: a head without the ``agent`` resource + agent nodes, 1 CPU each):

- ``fixed-1``: one agent node throughout;
- ``fixed-2``: two agent nodes throughout;
- ``elastic``: one agent node; a second joins at 20 % of fixed-1's crawl time; the first node is
  removed at 50 % (its agent dies; the other takes its shards over).

For each: steady pages/s (10th to 90th percentile of responses, see crawl_vs_scrapy.py), its audit (host/IP politeness, robots, URLs fetched twice), and
for the elastic run every membership change with its stop-the-world pause, hosts and shards moved
and the URLs recovered from the dead agent. No peer crawler can move hosts between running agents
(BUbiNG and Scrapy-redis need a restart with a new assignment), so the comparison is with our own
fixed clusters; on 2 cores pages/s is bounded by politeness and CPU, not by agents.

    .venv/bin/python benchmarks/elastic.py                 # websim 100 hosts / 10 IPs
    .venv/bin/python benchmarks/elastic.py --agent-dir     # no shared OUT: each agent in a directory
                                                           # of its own, moto's S3 server as the store

With ``--agent-dir`` the agents share no directory (``--agent-dir`` + ``--out-store``, moto's S3
server on loopback): the node removed at 50 % takes its disk with it, and the other agent takes its
shards over from their last checkpoint in the store and their logs in Redis.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from crawl_vs_scrapy import window_stats  # noqa: E402


def pages_now(out: Path) -> int:
    import redis

    url_file = out / "redis-url"
    if not url_file.exists():
        return 0
    try:
        return int(redis.Redis.from_url(url_file.read_text().strip()).hget("rc:stats", "pages") or 0)
    except (redis.RedisError, OSError):
        return 0


def run(web, out: Path, nodes: int, args, join_at: float = 0, leave_at: float = 0, store: str | None = None) -> dict:
    """One crawl in this process on a fresh cluster; membership changes at the given seconds
    after the first page."""
    import ray
    from ray.cluster_utils import Cluster

    from raycrawl.actors.cluster.driver import run_crawl
    from raycrawl.settings import build_settings

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1, resources={"agent": 1}) for _ in range(nodes)]
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    settings = build_settings(None, seeds=str(web.seeds_file), out=str(out), resolve=str(web.hosts_file),
                              allow_networks="127.0.0.0/8", host_delay=args.host_delay, ip_delay=args.ip_delay,
                              max_urls_per_host=100, elastic=True, near_dup=False,
                              **({"out_store": f"{store}/{out.name}", "agent_dir": str(out) + "-agents"} if store else {}))
    result: list[dict] = []
    crawl = threading.Thread(target=lambda: result.append(run_crawl(settings)))
    t0 = time.time()
    try:
        crawl.start()
        while crawl.is_alive() and pages_now(out) == 0:
            time.sleep(0.05)
        first = time.time()
        for at, change in ((join_at, "join"), (leave_at, "leave")):
            if not at:
                continue
            while crawl.is_alive() and time.time() < first + at:
                time.sleep(0.05)
            if not crawl.is_alive():
                break
            if change == "join":
                workers.append(cluster.add_node(num_cpus=1, resources={"agent": 1}))
            else:
                cluster.remove_node(workers.pop(0))
        crawl.join()
    finally:
        ray.shutdown()
        cluster.shutdown()
    t1 = time.time()
    web.flush_log()
    st = window_stats(web, t0, t1, None, args.host_delay, args.ip_delay)  # (in-process: no session CPU)
    rep = result[0] if result else {}
    st.update(recovered=rep.get("recovered"), membership=rep.get("membership", []),
              stopped=rep.get("stopped"), wall_s=round(t1 - t0, 1))
    return st


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--ips", type=int, default=10)
    ap.add_argument("--pages-per-host", type=float, default=12.0, help="websim's mean pages per host")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--agent-dir", action="store_true", help="no shared OUT: agent directories and an S3 store")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from raycrawl.websim import Websim

    rows = {}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        web = stack.enter_context(Websim(hosts=args.hosts, ips=args.ips, seed=7, clean=True,
                                         pages_per_host_mean=args.pages_per_host, out_dir=Path(tmp) / "web"))
        store = None
        if args.agent_dir:  # the nodes Cluster starts inherit the store's endpoint and credentials
            sys.path.insert(0, str(ROOT / "tests"))
            from s3_server import BUCKET, MotoS3

            os.environ.update(stack.enter_context(MotoS3()).env())
            store = f"s3://{BUCKET}"
        rows["fixed-1"] = run(web, Path(tmp) / "fixed-1", 1, args, store=store)
        print("fixed-1", rows["fixed-1"], file=sys.stderr)
        span = rows["fixed-1"]["head_s"] + rows["fixed-1"]["steady_s"] + rows["fixed-1"]["tail_s"]
        rows["fixed-2"] = run(web, Path(tmp) / "fixed-2", 2, args, store=store)
        rows["elastic"] = run(web, Path(tmp) / "elastic", 1, args, join_at=span * 0.2, leave_at=span * 0.5,
                              store=store)
    for name, r in rows.items():
        print(name, json.dumps(r), file=sys.stderr)
    print(f"websim {args.hosts} hosts / {args.ips} IPs, full crawl, host delay {args.host_delay} s, "
          f"IP delay {args.ip_delay} s, {os.cpu_count()} cores; agent nodes 1 CPU each"
          + ("; no shared OUT (--agent-dir, moto's S3 server)" if args.agent_dir else ""))
    print(f"{'run':>8} {'pages':>6} {'steady s':>9} {'steady pages/s':>15} {'vs fixed-1':>10} {'recovered':>9}  violations")
    base = rows["fixed-1"]["steady_pages_per_s"] or 1.0
    for name, r in rows.items():
        print(f"{name:>8} {r['pages']:>6} {r.get('steady_s', 0):>9} {r['steady_pages_per_s']:>15} "
              f"{r['steady_pages_per_s'] / base:>10.2f} {r['recovered'] or 0:>9}  {r['violations']}")
    for ev in rows["elastic"]["membership"]:
        change = " ".join([*(f"+{a}" for a in ev["joined"]), *(f"-{a}" for a in ev["left"])])
        print(f"  elastic: {change:<16} pause {ev['pause_s']:.2f} s (of which {ev['stop_s']:.2f} s waiting for "
              f"requests in flight to end), {ev['shards_moved']} shards and {ev['hosts_moved']} hosts moved")


if __name__ == "__main__":
    main()
