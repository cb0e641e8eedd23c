"""Every process's CPU, sampled from /proc every 0.1 s until the file STOP exists, by class (a Ray
worker by the actor it became, a crawl's driver, Ray's own processes; others by their command line).
Processes alive at the start count only what they spend after it (issue 50: where a crawl's CPU goes).
Each class's CPU-s, and of them the kernel's (system time: process starts, page faults, syscalls).
After the classes, the processes that spent most one by one, with how long they were seen (a
long-lived process's idle cost shows there: a cluster's own processes over a whole test run).

    .venv/bin/python benchmarks/process_census.py /tmp/STOP > census.txt &   # then run the crawl, then
    touch /tmp/STOP
"""

from __future__ import annotations

import collections
import os
import sys
import time

# In order: the raylet's and the GCS's binaries first (the raylet's arguments name the dashboard
# agent's script, and a census once counted the raylets as agents).
# websim by its command: a test's name or directory in a command line ("-k test_crawl_websim_audit",
# "status --out …/test_crawl_websim_audit0/…") once made pytest and `raycrawl status` count as websim.
KNOWN = ("raylet/raylet", "gcs/gcs_server", "raycrawl crawl", "dashboard/agent.py", "log_monitor", "runtime_env",
         "dashboard.py", "raycrawl websim serve", "valkey", "monitor.py", "default_worker")
TICK = os.sysconf("SC_CLK_TCK")


def classify(cmd: str) -> str:
    if cmd.startswith("ray::"):
        return cmd.split()[0].split(".")[0]  # (ray::Actor.method while a call runs)
    return next((k for k in KNOWN if k in cmd), "other:" + cmd[:70])


def main(stop: str) -> None:
    seen: dict[tuple[str, str], tuple[str, float, float]] = {}  # (class, CPU-s, of which in the kernel)
    base: dict[tuple[str, str], tuple[float, float]] = {}
    lived: dict[tuple[str, str], list[float]] = {}
    first = True
    while not os.path.exists(stop):
        now = time.monotonic()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/cmdline") as fh:
                    cmd = fh.read().replace("\0", " ").strip()
            except OSError:
                continue
            cpu, sys_cpu = (int(fields[11]) + int(fields[12])) / TICK, int(fields[12]) / TICK
            key = (pid, fields[19])  # (pid, start time): a pid reused is another process
            old = seen.get(key)
            if not cmd and old:  # exiting: keep its class
                seen[key] = (old[0], cpu, sys_cpu)
                continue
            cls = classify(cmd)
            # A Ray worker's title goes back to IDLE between calls: keep the actor it became.
            if old and old[0].startswith("ray::") and not old[0].startswith("ray::IDLE") and cls.startswith("ray::IDLE"):
                cls = old[0]
            seen[key] = (cls, cpu, sys_cpu)
            lived.setdefault(key, [now, now])[1] = now
            if first:
                base[key] = (cpu, sys_cpu)
        first = False
        time.sleep(0.1)
    by_class: dict[str, list] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for key, (cls, cpu, sys_cpu) in seen.items():
        cpu0, sys0 = base.get(key, (0.0, 0.0))
        if (spent := cpu - cpu0) > 0:
            by_class[cls][0] += spent
            by_class[cls][1] += sys_cpu - sys0
            by_class[cls][2] += 1
    print("# CPU-s, of which in the kernel, processes, class")
    for cls, (cpu, sys_cpu, n) in sorted(by_class.items(), key=lambda kv: -kv[1][0]):
        if cpu >= 0.05:
            print(f"{cpu:7.2f} {sys_cpu:6.2f} {n:4d} {cls}")
    print(f"{sum(c[0] for c in by_class.values()):7.2f} {sum(c[1] for c in by_class.values()):6.2f} total")
    print("# the processes that spent most: CPU-s, seconds seen, class")
    ranked = sorted(seen.items(), key=lambda kv: -(kv[1][1] - base.get(kv[0], (0.0, 0.0))[0]))
    for key, (cls, cpu, _) in ranked[:25]:
        print(f"{cpu - base.get(key, (0.0, 0.0))[0]:7.2f} {lived[key][1] - lived[key][0]:6.0f}s {cls}")


if __name__ == "__main__":
    main(sys.argv[1])
