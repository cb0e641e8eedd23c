"""What the picture at the end of every crawl run costs (``OUT/crawl-timeline.png``,
storage/crawl_timeline.py): today's code beside an earlier commit's, each in fresh processes as a
crawl's driver draws it (imports included), over a short crawl's timeline and a long one's.

    .venv/bin/python benchmarks/timeline_png.py [--base 13d9e98] [--runs 5]

13d9e98 drew it with matplotlib (0.44 CPU-s of its import alone); its successor with Pillow.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from code_at import env_at

from raycrawl.storage.crawl_timeline import COLUMNS

DRAW = ("import sys; from pathlib import Path; from raycrawl.storage.crawl_timeline import write_png; "
        "assert write_png(Path(sys.argv[1]), Path(sys.argv[2]))")


def timeline(directory: Path, samples: int) -> Path:
    """An agent's samples every 2 s: pages growing at ~100/s with a dip, queues filling then draining."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = ["\t".join(COLUMNS)]
    pages = errors = 0
    for i in range(samples):
        pages += 200 if i % 50 < 40 else 60
        errors += i % 3
        queued = int(5000 * min(i, samples - i) / samples)
        rows.append(f"{1.8e9 + 2 * i:.3f}\t{pages}\t{errors}\t{queued}\t{queued // 4}\t{min(300, queued // 10)}\t{64}")
    (directory / "agent0.tsv").write_text("\n".join(rows) + "\n")
    return directory


def cost(env: dict[str, str] | None, directory: Path, out: Path, runs: int) -> tuple[float, float]:
    """Median CPU-s and wall s of a fresh process drawing the picture."""
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", DRAW, str(directory), str(out)], check=True, env=env)
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="13d9e98", help="the earlier commit (default: the last with matplotlib)")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    base_env = env_at(a.base)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"# the crawl-timeline picture in a fresh process, median of {a.runs}: HEAD beside {a.base}")
        print(f"{'timeline':<26}{'HEAD CPU-s':>12}{'HEAD wall s':>13}{a.base + ' CPU-s':>16}{a.base + ' wall s':>16}{'ratio':>8}")
        for samples, name in ((10, "a short crawl (20 s)"), (1800, "an hour's crawl")):
            d = timeline(Path(tmp) / f"t{samples}", samples)
            head = cost(None, d, Path(tmp) / "head.png", a.runs)
            base = cost(base_env, d, Path(tmp) / "base.png", a.runs)
            print(f"{name:<26}{head[0]:>12.3f}{head[1]:>13.3f}{base[0]:>16.3f}{base[1]:>16.3f}{base[0] / head[0]:>7.1f}×")


if __name__ == "__main__":
    main()
