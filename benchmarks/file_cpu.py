"""Each test file's CPU run alone, every process it starts included (Ray's, websim's, Chromium's), and
each test's: where the suite's CPU goes (issue 50: ``make test`` under 10 minutes).

Each file runs in ``pytest -p no:xdist FILE`` inside a cgroup of its own (cgroup v1 ``cpuacct``, as
this machine has; needs root), two files at a time; this module, loaded into that pytest as a
plugin, reads the cgroup at each test's start and end (a module fixture counts in its first test).
Each run pays its own session cluster (~5 CPU-s).

    .venv/bin/python benchmarks/file_cpu.py OUT.txt tests/test_spam.py tests/test_crawl.py …
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
LANES = 2


def _usage(cgroup: str | Path) -> float:
    return int((Path(cgroup) / "cpuacct.usage").read_text()) / 1e9


# --- the plugin (inside each pytest): FILE_CPU_CGROUP and FILE_CPU_OUT name the cgroup and the report
_started: dict[str, tuple[float, float]] = {}


def pytest_runtest_logstart(nodeid, location) -> None:  # noqa: ANN001 - pytest's hook
    _started[nodeid] = (_usage(os.environ["FILE_CPU_CGROUP"]), time.time())


def pytest_runtest_logfinish(nodeid, location) -> None:  # noqa: ANN001 - pytest's hook
    cpu0, t0 = _started.pop(nodeid)
    with open(os.environ["FILE_CPU_OUT"], "a") as out:
        out.write(f"{_usage(os.environ['FILE_CPU_CGROUP']) - cpu0:8.1f} CPU-s {time.time() - t0:7.1f} s  {nodeid}\n")


# --- the driver
def run_file(test_file: str, out: Path, lock: threading.Lock) -> None:
    cgroup = CPUACCT / f"file_cpu_{os.getpid()}_{Path(test_file).stem}"
    cgroup.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(FILE_CPU_CGROUP=str(cgroup), FILE_CPU_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(ROOT / "benchmarks"), env.get("PYTHONPATH", "")]))
    t0 = time.time()
    pytest = f"{ROOT}/.venv/bin/pytest -q -p no:cacheprovider -p no:xdist -p file_cpu {test_file}"
    done = subprocess.run(["bash", "-c", f"echo $$ > {cgroup}/tasks; exec {pytest}"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    time.sleep(3)  # (what the run left behind ends, and is counted)
    last = (done.stdout.strip().splitlines() or ["?"])[-1]
    with lock, out.open("a") as fh:
        fh.write(f"{_usage(cgroup):8.1f} CPU-s {time.time() - t0:7.1f} s  TOTAL {test_file}  | {last}\n")
    for pid in (cgroup / "tasks").read_text().split():
        with contextlib.suppress(OSError):
            os.kill(int(pid), 9)
    time.sleep(1)
    cgroup.rmdir()


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not CPUACCT.is_dir() or os.geteuid() != 0:
        print(__doc__.strip().splitlines()[-1], "\n(needs root and cgroup v1's cpuacct at", CPUACCT, ")",
              file=sys.stderr)
        return 2
    out, files = Path(argv[0]), list(argv[1:])
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                if not files:
                    return
                test_file = files.pop(0)
            run_file(test_file, out, lock)

    lanes = [threading.Thread(target=lane) for _ in range(LANES)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
