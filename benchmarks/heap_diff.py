"""What grew in each process of a crawl, by source line: two tracemalloc snapshots per process.

    .venv/bin/python benchmarks/heap_diff.py HEAP_DIR [--top 12] [--skip 1]

``HEAP_DIR`` is where ``benchmarks/soak.py --heap HEAP_DIR`` had every process dump snapshots
(``<name>-<pid>-<seconds>.heap``). For each process: its traced total at each snapshot, then the
source lines whose live bytes grew most between the snapshot after ``--skip`` warm-up ones and
the last (their allocation traceback, innermost frame first).
"""

from __future__ import annotations

import argparse
import tracemalloc
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("heap_dir", type=Path)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--skip", type=int, default=1, help="snapshots taken as warm-up")
    args = ap.parse_args()
    runs: dict[str, list[Path]] = defaultdict(list)
    for f in sorted(args.heap_dir.glob("*.heap")):
        name, pid, _ = f.stem.rsplit("-", 2)
        runs[f"{name}-{pid}"].append(f)
    for proc, files in sorted(runs.items()):
        if len(files) <= args.skip + 1:
            continue
        totals = [sum(s.size for s in tracemalloc.Snapshot.load(str(f)).statistics("filename")) for f in files]
        print(f"\n== {proc}: traced MB per snapshot " + " ".join(f"{t / 2**20:.0f}" for t in totals))
        old = tracemalloc.Snapshot.load(str(files[args.skip])).filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        new = tracemalloc.Snapshot.load(str(files[-1])).filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        print(f"   growth {files[args.skip].stem.rsplit('-', 1)[1]} s -> {files[-1].stem.rsplit('-', 1)[1]} s:")
        grew = sorted((d for d in new.compare_to(old, "traceback") if d.size_diff > 0), key=lambda d: -d.size_diff)
        for d in grew[: args.top]:
            where = " <- ".join(f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(d.traceback))
            print(f"   {d.size_diff / 2**20:+8.1f} MB {d.count_diff:+9d} blocks  {where}")


if __name__ == "__main__":
    main()
