"""What a long-lived test cluster's own processes cost while it idles (issue 50: the suite's run
cluster lives through every job of a run), with Ray's defaults and with tests/local_cluster.py's
LONG_LIVED settings, side by side in one run.

    .venv/bin/python benchmarks/cluster_idle.py [--actors 160] [--seconds 20]

Each setting gets a head of 4 CPUs (tests/local_cluster.py) on which ``--actors`` actors come and
go (as a run's crawls leave their workers' log files behind) and a driver then keeps the 4 idle
workers its tasks used; then each process's CPU over ``--seconds`` of idleness, from /proc.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One setting's measurement, in a process of its own (a fresh Ray).
PROBE = """
import os, sys, time
sys.path.insert(0, {tests!r})
import ray
import psutil  # (Ray bundles it: importable once ray is)
import local_cluster
if not {long_lived}:
    local_cluster.LONG_LIVED = {{}}
cluster = local_cluster.local_cluster(4)
ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)

@ray.remote(num_cpus=0)
class A:
    def ping(self):
        return os.getpid()

@ray.remote(num_cpus=1)
def task():
    time.sleep(0.5)
    return os.getpid()

for _ in range({actors} // 20):
    actors = [A.remote() for _ in range(20)]
    ray.get([a.ping.remote() for a in actors])
    for a in actors:
        ray.kill(a)
workers = set(ray.get([task.remote() for _ in range(4)]))
time.sleep(3)
mine = {{p.pid: p for p in psutil.Process().children(recursive=True)}}
for pid in workers:
    if psutil.pid_exists(pid):
        mine[pid] = psutil.Process(pid)

def cpu():
    out = {{}}
    for pid, p in mine.items():
        try:
            out[pid] = sum(p.cpu_times()[:2])
        except psutil.Error:
            pass
    return out

def name(p):
    cmd = " ".join(p.cmdline())
    for key in ("log_monitor", "raylet", "gcs_server", "DashboardAgent", "RuntimeEnvAgent", "dashboard.py"):
        if key in cmd:
            return key
    return "idle worker" if p.pid in workers else cmd[:40]

a = cpu(); time.sleep({seconds}); b = cpu()
rates = {{}}
for pid, t in a.items():
    if pid in b:
        k = name(mine[pid])
        rates[k] = rates.get(k, 0.0) + (b[pid] - t) / {seconds} * 1000
alive = sum(1 for pid in workers if pid in b)
print(f"{{'LONG_LIVED' if {long_lived} else 'Ray defaults':14}} idle workers alive after {{{seconds} + 3}} s: {{alive}}")
for k, v in sorted(rates.items(), key=lambda kv: -kv[1]):
    print(f"    {{v:6.1f}} ms/s  {{k}}")
print(f"    {{sum(rates.values()):6.1f}} ms/s  total")
ray.shutdown(); cluster.shutdown()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actors", type=int, default=160)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    for long_lived in (False, True):
        code = PROBE.format(tests=str(ROOT / "tests"), long_lived=long_lived, actors=args.actors, seconds=args.seconds)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        lines = [line for line in r.stdout.splitlines() if "(raylet)" not in line]  # (Ray's own warnings)
        print("\n".join(lines) if r.returncode == 0 else f"failed:\n{r.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()
