"""What losing a machine costs, on machines that share nothing (tests/netns_cluster.py: a head and
three agent nodes in network namespaces of their own, ``ray start`` as ray_cluster.yaml starts VMs,
``ray job submit``, Redis with a password, moto's S3 server, ``--agent-dir`` + ``--out-store``).

One websim (default 2,000 hosts on 100 IPs, 5 pages a host on average), one one-agent crawl of it
from this machine's own namespace (the baseline), then one cloud crawl per fault, each on a fresh
cluster, the fault at a moment of the crawl:

- ``early`` / ``middle`` / ``late``: an agent node lost (SIGKILL to every process, its cable cut,
  its disk deleted) at 10 / 40 / 75 % of the baseline's pages;
- ``commit``: the same at 40 %, while Redis holds every write (CLIENT PAUSE WRITE): the node dies
  with its commits unanswered;
- ``handoff``: a fourth agent node joins at 30 %; an old agent's node is lost as soon as the
  newcomer's agent runs, while the shards move to it;
- ``shut-down``: at 40 % the agent node's VM shuts down (a spot VM reclaimed, a scale-down):
  systemd stops the node's service as ray_cluster.yaml defines it, SIGTERM to ``ray start
  --block`` alone (Ray then drains the node before it ends it), SIGKILL to what is left;
- ``sigterm``: SIGTERM to every process of an agent node at 40 % (``ray stop``, which signals the
  raylet first: Ray ends the node's workers at once, so this is a death);
- ``drain``: at 40 %, ``ray drain-node`` by hand, then SIGTERM once the agent left.

For each: exit code, pages, baseline pages missing, pages websim served that no stored WARC holds,
URLs fetched twice against URLs Redis held in flight at the fault, host/IP/robots violations, the
longest time with no request at all after the fault, and the membership event (seconds to bury the
dead agent while the others crawled on, the stop-the-world pause).

    .venv/bin/python benchmarks/machines.py [--hosts 2000] [--faults early,middle,...] [--by shut-down]

``--by shut-down``: the node at ``early`` ... ``handoff`` shuts down instead of being lost (during
a commit: Redis's writes held the second after the SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from archive_check import served_pages, stored_pages  # noqa: E402
from netns_cluster import Machines, available  # noqa: E402

from raycrawl.actors.frontier.workbench import inflight_url  # noqa: E402
from raycrawl.storage.link_records import iter_link_records  # noqa: E402
from raycrawl.websim.audit import audit  # noqa: E402

DELAYS = (0.25, 0.05)
FAULTS = {"early": 0.10, "middle": 0.40, "late": 0.75, "commit": 0.40, "handoff": 0.30, "shut-down": 0.40,
          "sigterm": 0.40, "drain": 0.40}
CONFIG = "[crawl]\nread_timeout = 3.0\nconnect_timeout = 2.0\nmax_retries = 1\nretry_backoff = 0.5\nmax_crawl_delay = 1.0\n"


def page_key(url: str) -> str:
    """A URL without its port: each run serves the same web from a websim of its own, on a port of
    its own."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return f"{u.scheme}://{u.hostname}{u.path}" + (f"?{u.query}" if u.query else "")


def politeness(config: Path) -> list[str]:
    return ["--host-delay", str(DELAYS[0]), "--ip-delay", str(DELAYS[1]), "--max-urls-per-host", "60",
            "--config", str(config)]


def strike(hit, fault: str, by: str, r) -> float | None:
    """The fault itself, Redis's writes held; seconds until a node that leaves had left."""
    def held() -> None:
        if fault == "commit":
            time.sleep(1.0)  # (agents' commits pile up behind the pause)

    def thaw() -> None:
        held()
        r.execute_command("CLIENT", "UNPAUSE")

    if fault == "sigterm":
        hit.signal(15)
    elif fault == "drain":
        thaw()  # (its agent must commit to leave)
        return hit.drain(30)
    elif fault == "shut-down" or by == "shut-down":
        return hit.shut_down(meanwhile=thaw)
    else:
        held()
        hit.lose()
    return None


def fault_run(base: Path, params: dict, fault: str, at: int, baseline: set[str], by: str = "loss") -> dict:
    """One cloud crawl on a fresh cluster of three agent nodes with ``fault`` after ``at`` pages:
    the node lost, or (``by="shut-down"``) shut down."""
    with Machines(base, agents=3) as m:
        config = m.base / "crawl.toml"
        config.write_text(CONFIG)
        with m.websim(m.base / "web", **params) as web:
            m.wait_dashboard()
            log = m.base / "job.log"
            r = m.redis_client()
            job = m.submit([*m.crawl_args(web, fault), *politeness(config)], log)
            hit, t_fault, inflight, left_in = None, 0.0, set(), None
            while job.poll() is None:
                time.sleep(0.2)
                if hit is not None or int(r.hget("rc:stats", "pages") or 0) < at:
                    continue
                if fault == "handoff":
                    new = m.add_agent()
                    while not new.has("ray::AgentActor") and job.poll() is None:
                        time.sleep(0.05)
                hit = next(a for a in m.agents() if a.has("ray::AgentActor") and a.name != "agent4")
                r.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
                inflight = {inflight_url(k.decode()) for k in r.hkeys("rc:inflight")}
                t_fault = time.time()
                left_in = strike(hit, fault, by, r)
                r.execute_command("CLIENT", "UNPAUSE")
            text = log.read_text(errors="replace")
            web.flush_log()
            requests = web.requests()
            report = json.loads((m.head.dir / fault / "report.json").read_text()) if job.returncode == 0 else {}
            fetched = {page_key(rec.url) for rec in iter_link_records(m.head.dir / fault)} if report else set()
            served = served_pages(web, requests)
            stored = stored_pages(m.s3.objects(fault), m.base / "warcs")
            rep = audit(requests, web.manifest, *DELAYS)
    kinds = Counter(v.kind for v in rep.violations)
    twice = {v.key for v in rep.violations if v.kind == "duplicate"}
    after = sorted(q.start for q in requests if q.start >= t_fault) if t_fault else []
    pause = max((b - a for a, b in zip([t_fault, *after], after, strict=False)), default=0.0)
    events = report.get("membership", [])
    return {"fault": fault if by == "loss" else f"{fault} ({by})", "at_pages": at, "exit": job.returncode, "pages": report.get("pages"),
            "left_s": None if left_in is None else round(left_in, 1),
            "missing": len(baseline - fetched), "not_stored": len(served - stored),
            "in_flight": len(inflight), "twice": len(twice), "twice_not_in_flight": len(twice - inflight),
            "host": kinds["host"], "ip": kinds["ip"], "robots": kinds["robots"],
            "longest_gap_s": round(pause, 1), "tracebacks": text.count("Traceback"),
            "events": [{k: e[k] for k in ("left", "joined", "drained", "bury_s", "pause_s") if k in e} for e in events],
            "detected_s": round(events[0]["time"] - t_fault - events[0]["pause_s"] - events[0]["bury_s"], 1)
            if events and t_fault else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--pages-per-host", type=float, default=5.0)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--by", choices=("loss", "shut-down"), default="loss",
                    help="the node at early/middle/late/commit/handoff is lost (SIGKILL) or shut down (SIGTERM to its service)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    if (why := available()) is not None:
        print(f"machines.py: {why}", file=sys.stderr)
        return 2
    params = {"hosts": args.hosts, "ips": args.ips, "seed": 3, "pages_per_host_mean": args.pages_per_host}
    work = Path(tempfile.mkdtemp(prefix="machines-"))
    # The baseline: one agent, local Ray, from this namespace, of the same web (websim on its node).
    with Machines(work / "base", agents=0) as m:
        config = m.base / "crawl.toml"
        config.write_text(CONFIG)
        with m.websim(m.base / "web", **params) as web:
            t0 = time.time()
            env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
            done = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file),
                                   "--out", str(work / "one"), "--dns-server", "{}:{}".format(*web.dns_address),
                                   "--allow-networks", f"{m.net}.0.0/16", *politeness(config)],
                                  capture_output=True, text=True, env=env)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
    baseline = {page_key(rec.url) for rec in iter_link_records(work / "one")}
    print(f"baseline: one agent, {len(baseline)} pages in {time.time() - t0:.0f} s", flush=True)
    rows = []
    for fault in args.faults.split(","):
        row = fault_run(work / fault, params, fault, int(FAULTS[fault] * len(baseline)), baseline, args.by)
        rows.append(row)
        print(json.dumps(row), flush=True)
    cols = ["fault", "exit", "pages", "missing", "not_stored", "in_flight", "twice", "twice_not_in_flight",
            "host", "ip", "robots", "longest_gap_s", "detected_s", "left_s", "tracebacks"]
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
