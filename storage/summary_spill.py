"""Spill files: what a crawl's summary writers accumulate, read back by the archive build
(storage/summaries.py).

A spill file (``DIR/summaries/spill/<writer>-<seq>.spill.gz``) holds gzip members of msgpack maps
{"url", "length", "terms": {term: count}} in crawl order (same framing as link records, so a torn
tail is dropped cleanly). Archives built per agent are merged by building from all agents' spill
files at once. A module of its own: the crawl writes spill files and never decodes an archive, so
its processes do not import the archive's numba decoder (~0.3 s a process).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from raycrawl import durable
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)

SPILL_SUBDIR = "spill"
SPILL_SUFFIX = ".spill.gz"


class SpillWriter:
    """Appends per-document term counts to a spill file, one gzip member per batch."""

    def __init__(self, spill_dir: str | Path, writer: str = "agent0", batch: int = 256) -> None:
        self.dir = Path(spill_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        existing = sorted(self.dir.glob(f"{writer}-*{SPILL_SUFFIX}"))
        seq = int(existing[-1].name[len(writer) + 1 : -len(SPILL_SUFFIX)]) + 1 if existing else 0
        self.path = self.dir / f"{writer}-{seq:05d}{SPILL_SUFFIX}"
        self.batch = batch
        self._pending: list[dict] = []
        self.count = 0

    def add(self, url: str, length: int, counts: dict[str, int]) -> None:
        self._pending.append({"url": url, "length": int(length), "terms": counts})
        if len(self._pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        """Make every added document durable (one more gzip member)."""
        import gzip

        import msgpack

        if not self._pending:
            return
        packer = msgpack.Packer(use_bin_type=True)
        payload = b"".join(packer.pack(r) for r in self._pending)
        durable.append(self.path, gzip.compress(payload, compresslevel=3))  # before the batch's commit
        self.count += len(self._pending)
        self._pending.clear()

    def close(self) -> None:
        self.flush()


def spill_paths(crawl_or_spill_dir: str | Path) -> list[Path]:
    p = Path(crawl_or_spill_dir)
    for d in (layout(p).summaries / SPILL_SUBDIR, p / SPILL_SUBDIR, p):
        found = sorted(d.glob(f"*{SPILL_SUFFIX}"))
        if found:
            return found
    return []


def iter_spill(paths: Iterable[str | Path]) -> Iterator[dict]:
    """Every document record of the given spill files, file by file."""
    from raycrawl.storage.link_records import read_frames  # same gzip-members-of-msgpack framing

    for path in paths:
        for rec in read_frames(path):
            if not isinstance(rec, dict) or "url" not in rec or "terms" not in rec:
                log.warning("%s: skipping malformed spill record", path)
                continue
            yield rec
