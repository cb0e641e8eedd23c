"""The machine CPU and the wall time of test files run one at a time (issue 50: the suite is
CPU-bound on two cores, so its time is what its files cost in CPU).

    .venv/bin/python benchmarks/suite_cpu.py test_agents.py test_crawl.py ...

Each file runs alone (``pytest -q -p no:cacheprovider tests/FILE``, its own session Ray cluster:
~5 CPU-s of each figure); the CPU is every process's, from ``/proc/stat``, so run it on an
otherwise idle machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main(files: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    print(f"{'file':32} {'cpu_s':>7} {'wall_s':>7}  result")
    for name in files:
        b0, t0 = busy_seconds(), time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/{name}"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        cpu, wall = busy_seconds() - b0, time.monotonic() - t0
        print(f"{name:32} {cpu:7.1f} {wall:7.1f}  {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.returncode}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["test_agents.py"])
