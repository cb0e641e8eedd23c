"""The CPU and the wall time of test files run one at a time (issue 50: the suite is CPU-bound on
two cores, so its time is what its files cost in CPU).

    .venv/bin/python benchmarks/suite_cpu.py [--jobs 2] [--per-test] [test_agents.py test_crawl.py ...]   # default: every file

Each file runs alone (``pytest -q -p no:cacheprovider -p no:xdist tests/FILE``, with a session Ray
cluster of its own: ~3.5 CPU-s of each figure, the cost of a file that does nothing). Where the
machine has cgroup v1's ``cpuacct`` (as root), each file runs in a cgroup of its own and its figure
is the CPU of every process it started, Ray's and the browsers' included, whatever else runs:
``--jobs`` files at once. Elsewhere the figure is the machine's busy CPU from ``/proc/stat``, so
the files run one after the other on an otherwise idle machine.

With ``--per-test`` (cgroups only) every test's CPU is listed too: this module, loaded into pytest
as a plugin, reads the file's cgroup at each test's start and end (a test's figure includes what
the file's other processes, its session cluster's, spent meanwhile; its fixtures' set-up counts
for the first test that uses them), and the CPU of pytest's own process. The plugin works in any
pytest run (``make test``'s workers too) with ``PYTHONPATH=benchmarks RAYCRAWL_TEST_CPU_OUT=FILE
pytest -p suite_cpu``: a line a test, its cgroup's CPU (0 without ``RAYCRAWL_TEST_CGROUP``), then
its process's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _cgroup(name: str) -> Path | None:
    try:
        group = CPUACCT / f"raycrawl-suite-{os.getpid()}-{name}"
        group.mkdir(exist_ok=True)
        return group
    except OSError:
        return None


def _usage() -> float:
    """The CPU of the test's cgroup, 0 without one."""
    group = os.environ.get("RAYCRAWL_TEST_CGROUP")
    return int(Path(group, "cpuacct.usage").read_text()) / 1e9 if group else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ANN201 - the plugin's pytest hook
    """One line a test, written by the process that runs it (under xdist its worker, never the
    controller, which only reports): its cgroup's CPU (0 without one), then its process's."""
    out = os.environ.get("RAYCRAWL_TEST_CPU_OUT")
    group, own = _usage(), time.process_time()
    yield
    if out:
        with open(out, "a") as fh:
            fh.write(f"{_usage() - group:.1f}\t{time.process_time() - own:.1f}\t{item.nodeid}\n")


def run_file(name: str, env: dict[str, str], grouped: bool, per_test: bool = False
             ) -> tuple[str, float, float, str]:
    """(file, CPU s, wall s, pytest's last line)."""
    group = _cgroup(name) if grouped else None
    base = Path(f"/tmp/suite-cpu-{os.getpid()}")
    base.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"tests/{name}",
           "--basetemp", str(base / name)]
    tests = base / f"{name}.tests"
    if per_test and group is not None:
        env = {**env, "RAYCRAWL_TEST_CGROUP": str(group), "RAYCRAWL_TEST_CPU_OUT": str(tests),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), env.get("PYTHONPATH")]))}
        cmd += ["-p", "suite_cpu"]
    b0, t0 = busy_seconds(), time.monotonic()
    if group is not None:  # (the shell joins the group, then becomes pytest: every descendant is in it)
        cmd = ["sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh", *cmd]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if group is not None:
        time.sleep(2)  # (Ray's processes of the file's cluster exit after pytest)
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        for pid in (group / "cgroup.procs").read_text().split():  # (a straggler would hold the group)
            subprocess.run(["kill", "-9", pid], capture_output=True)
        time.sleep(0.5)
        with contextlib.suppress(OSError):
            group.rmdir()
    else:
        cpu = busy_seconds() - b0
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"exit {r.returncode}"
    if tests.exists():
        last += "".join(f"\n    {line}" for line in sorted(tests.read_text().splitlines(), key=lambda x: -float(x.split()[0])))
    return name, cpu, wall, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="files at once where cgroups measure each (default 2)")
    ap.add_argument("--per-test", action="store_true", help="each test's CPU too (cgroups only)")
    ap.add_argument("files", nargs="*", help="test files (default: every tests/test_*.py)")
    args = ap.parse_args()
    files = args.files or sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    grouped = _cgroup("probe") is not None
    if grouped:
        (CPUACCT / f"raycrawl-suite-{os.getpid()}-probe").rmdir()
    jobs = args.jobs if grouped else 1
    print(f"# CPU: {'each file’s processes (cgroup cpuacct)' if grouped else 'the machine’s (/proc/stat)'}; "
          f"{jobs} file(s) at once")
    print(f"{'file':36} {'cpu_s':>7} {'wall_s':>7}  result", flush=True)
    total = 0.0
    with ThreadPoolExecutor(jobs) as pool:
        for name, cpu, wall, last in pool.map(lambda f: run_file(f, env, grouped, args.per_test), files):
            total += cpu
            print(f"{name:36} {cpu:7.1f} {wall:7.1f}  {last}", flush=True)
    print(f"{'total':36} {total:7.1f}")


if __name__ == "__main__":
    main()
