"""The live progress line: one rewritten line on a terminal, periodic log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

log = logging.getLogger(__name__)


class Progress:
    def __init__(self, interval: float = 1.0, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        # Off a terminal, a line per second would flood logs: every 10 intervals instead.
        self.interval = interval if self.tty else interval * 10
        self.last = 0.0
        self.width = 0

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.interval

    def show(self, fields: dict[str, object]) -> None:
        """Print ``fields`` as ``name value`` pairs (if the interval has passed)."""
        if not self.due():
            return
        self.last = time.monotonic()
        line = "  ".join(f"{k} {v}" for k, v in fields.items())
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.stream.flush()
            self.width = len(line)
        else:
            self.stream.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} progress: {line}\n")
            self.stream.flush()

    def show_crawl(self, counts: dict, stats: dict, statuses: list[dict], pages_per_s: float) -> None:
        """The crawl's line, from the frontier's counts and stats and the fetch actors' statuses."""
        self.show({"pages": stats.get("pages", 0), "pages/s": f"{pages_per_s:.1f}",
                   "front": counts["front"], "queued": counts["queued"], "virtual": counts["virtualized"],
                   "in-flight": sum(x["in_flight"] for x in statuses),
                   "errors": sum(v for k, v in stats.items() if k.startswith("error:"))})

    def close(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
