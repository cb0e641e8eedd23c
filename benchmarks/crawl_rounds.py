"""One small crawl joined to a running Ray cluster, as the test suite runs dozens: machine CPU per
process (sampled from ``/proc``) and the Ray calls the agent's loop makes per round (issue 50: a
small, politeness-bound crawl pays per round, not per page).

    .venv/bin/python benchmarks/crawl_rounds.py [--hosts 30] [--at COMMIT]

``--at COMMIT``: run that commit's raycrawl (``benchmarks/code_at.py``) on the same web, for a
before/after. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TCK = os.sysconf("SC_CLK_TCK")
# Runs the crawl CLI with every actor call counted by method, and the agent's rounds (its drains).
WRAPPER = """
import atexit, collections, runpy, sys
import ray.actor as ra
counts = collections.Counter()
orig = ra.ActorMethod._remote
def counted(self, *a, **k):
    counts[self._method_name] += 1
    return orig(self, *a, **k)
ra.ActorMethod._remote = counted
import raycrawl.actors.cluster.crew as crew
rounds = [0]
drain = crew.Crew.drain
def counting(self, n):
    rounds[0] += 1
    return drain(self, n)
crew.Crew.drain = counting
def report():
    print("ROUNDS", rounds[0], file=sys.stderr)
    for k, v in counts.most_common():
        print("CALLS", k, v, file=sys.stderr)
atexit.register(report)
sys.argv = ["raycrawl", *sys.argv[1:]]
runpy.run_module("raycrawl", run_name="__main__")
"""


def snapshot() -> dict[int, tuple[float, str]]:
    out = {}
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{e.name}/stat").read_text()
            cmd = Path(f"/proc/{e.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        f = stat.rsplit(")", 1)[1].split()
        out[int(e.name)] = ((int(f[11]) + int(f[12])) / TCK, cmd)
    return out


def kind(cmd: str) -> str:
    if cmd.startswith("ray::"):
        return cmd.split()[0].split(".")[0]
    if "raycrawl" in cmd and " crawl " in cmd:
        return "driver"
    for name in ("valkey-server", "raylet", "gcs_server", "dashboard", "log_monitor", "runtime_env"):
        if name in cmd:
            return name
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=30)
    ap.add_argument("--at", default="HEAD", help="the commit whose raycrawl runs (default: the work tree)")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["RAY_enable_worker_prestart"] = "0"  # noqa: SIM112 - Ray reads it as spelled
    from code_at import env_at
    from ray.cluster_utils import Cluster

    from raycrawl.websim import Websim

    # The cluster's worker processes run the commit's code too: they inherit the environment of the
    # process that starts the cluster (a joined cluster's workers do not inherit the driver's).
    env = env_at(args.at, {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if "PYTHONPATH" in env:
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False})
    tmp = Path(tempfile.mkdtemp())
    try:
        with Websim(hosts=args.hosts, ips=5, seed=1, clean=True, out_dir=tmp / "web") as web:
            time.sleep(3)
            base, seen, stop = snapshot(), {}, threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    for pid, (cpu, cmd) in snapshot().items():
                        seen[pid] = (cpu, cmd or seen.get(pid, (0, ""))[1])
                    time.sleep(0.1)

            sampler = threading.Thread(target=sample)
            sampler.start()
            env["RAY_ADDRESS"] = cluster.address
            started = time.monotonic()
            r = subprocess.run([sys.executable, "-c", WRAPPER, "crawl", "--seeds", str(web.seeds_file), "--out",
                                str(tmp / "crawl"), "--dns-server", "{}:{}".format(*web.dns_address),
                                "--allow-networks", "127.0.0.0/8", "--host-delay", "0.05", "--ip-delay", "0"],
                               env=env, capture_output=True, text=True, cwd=tmp)
            wall = time.monotonic() - started
            time.sleep(1)
            stop.set()
            sampler.join()
    finally:
        cluster.shutdown()
    if r.returncode != 0:
        sys.exit(f"the crawl failed:\n{r.stderr[-3000:]}")
    pages = next((line for line in r.stdout.splitlines() if line.startswith("pages")), "?")
    cpu: collections.Counter[str] = collections.Counter()
    for pid, (c, cmd) in seen.items():
        before = base.get(pid)
        cpu[kind(cmd)] += c - (before[0] if before and before[1] == cmd else 0)
    rounds = next(int(line.split()[1]) for line in r.stderr.splitlines() if line.startswith("ROUNDS"))
    calls = [line.split()[1:] for line in r.stderr.splitlines() if line.startswith("CALLS")]
    print(f"at {args.at}  {pages}  wall {wall:.1f} s")
    print(f"{'process':28} {'CPU-s':>7}")
    for k, v in cpu.most_common():
        if v >= 0.05:
            print(f"{k:28} {v:7.2f}")
    print(f"{'machine (all processes)':28} {sum(cpu.values()):7.2f}")
    print(f"rounds {rounds}")
    for name, n in calls:
        print(f"  {name:26} {int(n):6d} calls  {int(n) / max(1, rounds):5.2f} a round")


if __name__ == "__main__":
    main()
