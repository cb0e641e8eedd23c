"""Heap snapshots on demand, for finding what grows in a long crawl (benchmarks/soak.py --heap).

With ``RAYCRAWL_HEAP_DIR`` set, every process that calls :func:`start` (each actor, the driver)
traces its Python allocations and dumps a tracemalloc snapshot there every
``RAYCRAWL_HEAP_EVERY`` seconds (default 300) as ``<name>-<pid>-<seconds>.heap``;
``benchmarks/heap_diff.py`` says which source lines grew between two of them. Off by default:
tracing costs time on every allocation.
"""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from pathlib import Path

HEAP_DIR_ENV = "RAYCRAWL_HEAP_DIR"
HEAP_EVERY_ENV = "RAYCRAWL_HEAP_EVERY"
_started = False


def start(name: str) -> None:
    """Snapshot this process's heap periodically if the environment asks for it; else nothing."""
    global _started
    where = os.environ.get(HEAP_DIR_ENV)
    if not where or _started:
        return
    _started = True
    every = float(os.environ.get(HEAP_EVERY_ENV, "300"))
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(4)
    began = time.monotonic()

    def dump() -> None:
        while True:
            time.sleep(every)
            at = int(time.monotonic() - began)
            path = out / f"{name}-{os.getpid()}-{at:06d}.heap"
            tracemalloc.take_snapshot().dump(str(path) + ".part")
            os.replace(str(path) + ".part", path)

    threading.Thread(target=dump, name="heap-watch", daemon=True).start()
