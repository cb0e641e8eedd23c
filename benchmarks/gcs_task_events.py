"""What Ray's GCS keeps per actor call: one actor, ``--calls`` calls of a method with task events on
(Ray's default) and of one marked ``@per_batch`` (actors/__init__.py: ``enable_task_events=False``),
each in a fresh local Ray started as the crawl starts it (core/ray_start.py, which caps the GCS's
task-event buffer). Prints the GCS process's private memory (RssAnon) every tenth of the calls.

    .venv/bin/python benchmarks/gcs_task_events.py [--calls 150000]

A crawl makes about ten actor calls a batch, so the GCS grows with pages unless the per-batch
methods record no events (benchmarks/RESULTS.md, "What grew in Ray's GCS").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def gcs_anon_mb() -> float:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if b"gcs_server" not in Path(f"/proc/{d}/cmdline").read_bytes():
                continue
            for line in Path(f"/proc/{d}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            continue
    return float("nan")


def run(calls: int, events: bool) -> list[float]:
    import ray

    from raycrawl.actors import per_batch
    from raycrawl.ray_start import start_ray

    start_ray(num_cpus=1)
    try:
        mark = (lambda f: f) if events else per_batch

        @ray.remote(num_cpus=0)
        class Probe:
            @mark
            def work(self, batch: list[int]) -> int:
                return len(batch)

        actor = Probe.remote()
        ray.get(actor.work.remote([0]))
        time.sleep(2)
        series = [gcs_anon_mb()]
        batch = list(range(100))
        for tenth in range(10):
            refs = []
            for _ in range(calls // 10):
                refs.append(actor.work.remote(batch))
                if len(refs) >= 200:
                    ray.get(refs)
                    refs = []
            ray.get(refs)
            time.sleep(1.5)  # the workers report their events about once a second
            series.append(gcs_anon_mb())
            print(f"  events {'on ' if events else 'off'} {(tenth + 1) * calls // 10:>8} calls: "
                  f"GCS {series[-1]:.1f} MB", flush=True)
        return series
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=150_000)
    args = ap.parse_args()
    rows = {}
    for events in (True, False):
        rows[events] = run(args.calls, events)
    print(f"\nGCS private memory (RssAnon), one actor, {args.calls:,} calls of 100 items:")
    print(f"{'task events':<26}{'start':>8}{'1st tenth':>11}{'end':>8}{'after 1st tenth':>18}")
    for events, s in rows.items():
        label = "on (Ray's default)" if events else "off (@per_batch)"
        print(f"{label:<26}{s[0]:>8.1f}{s[1]:>11.1f}{s[-1]:>8.1f}{s[-1] - s[1]:>+15.1f} MB")


if __name__ == "__main__":
    main()
