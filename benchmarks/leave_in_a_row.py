"""``test_node_leaves_mid_crawl`` many times in a row under the suite's own load (issue 49: 20 runs in
a row, 0 politeness violations).

A clean clone of this repository gets four extra test files, each running the test's body
``--runs-per-file`` times (an OUT each); ``make test`` then runs them beside the whole suite, one
file per pytest worker (``--dist loadfile``), so each run shares the machine with the suite's other
crawls. Every run is audited as the test itself audits (0 host, IP and robots.txt violations; no URL
fetched twice but those Redis held in flight at the removal). Prints ``make test``'s summary line.

    .venv/bin/python benchmarks/leave_in_a_row.py                 # 4 × 5 runs, ~20 min on 2 cores
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TEST = '''# ruff: noqa
"""Written by benchmarks/leave_in_a_row.py: test_node_leaves_mid_crawl {runs} times."""
import pytest
from test_agents import leave_mid_crawl, web_and_baseline


@pytest.mark.slow
@pytest.mark.parametrize("i", range({runs}))
def test_node_leaves_mid_crawl_again(web_and_baseline, i) -> None:
    leave_mid_crawl(web_and_baseline, f"leave{{i}}")
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=4, help="test files (one per pytest worker)")
    ap.add_argument("--runs-per-file", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "raycrawl"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for i in range(args.files):
            (clone / "tests" / f"test_zz_leave_{i}.py").write_text(TEST.format(runs=args.runs_per_file))
        proc = subprocess.run(["make", "test"], cwd=clone, capture_output=True, text=True)
        lines = proc.stdout.splitlines()
        print("\n".join(ln for ln in lines if "leave" in ln and ("s call" in ln or "FAILED" in ln)))
        print(next((ln for ln in reversed(lines) if " passed" in ln or " failed" in ln), proc.stderr[-2000:]))
        sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
