"""Spill files: what a crawl's summary writers accumulate, read back by the archive build
(storage/summaries.py).

A spill file (``DIR/summaries/spill/<writer>-<seq>.spill.gz``) holds gzip members of msgpack maps
{"url", "length", "terms": {term: count}[, "rendered": true]} in crawl order (same framing as link records, so a torn
tail is dropped cleanly). Archives built per agent are merged by building from all agents' spill
files at once. A module of its own: the crawl writes spill files and never decodes an archive, so
its processes do not import the archive's numba decoder (~0.3 s a process).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from raycrawl import durable
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)

SPILL_SUBDIR = "spill"
SPILL_SUFFIX = ".spill.gz"


class SpillWriter:
    """Appends per-document term counts to a spill file, one gzip member per batch; a new file
    after each :meth:`roll`."""

    def __init__(self, spill_dir: str | Path, writer: str = "agent0", batch: int = 256,
                 on_closed: Callable[[Path], None] | None = None, elsewhere: Iterable[str] = ()) -> None:
        """``on_closed(path)``: called with each file once complete (rolled or closed);
        ``elsewhere``: names of this crawl's spill files kept elsewhere (an object store's), which a
        new file's name must not take (an agent of the same name wrote them on another machine)."""
        self.dir = Path(spill_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.writer, self.on_closed = writer, on_closed
        names = [*(p.name for p in self.dir.glob(f"{writer}-*{SPILL_SUFFIX}")), *elsewhere]
        seqs = [int(seq) for n in names if n.startswith(writer + "-") and n.endswith(SPILL_SUFFIX)
                and (seq := n[len(writer) + 1 : -len(SPILL_SUFFIX)]).isdigit()]
        self.seq = max(seqs) + 1 if seqs else 0
        self.batch = batch
        self._pending: list[dict] = []
        self.count = 0
        self.in_file = 0

    @property
    def path(self) -> Path:
        return self.dir / f"{self.writer}-{self.seq:05d}{SPILL_SUFFIX}"

    def add(self, url: str, length: int, counts: dict[str, int], rendered: bool = False) -> None:
        """``rendered``: the counts are of the page as a browser rendered it (the archive build
        prefers them to its markup's)."""
        rec = {"url": url, "length": int(length), "terms": counts}
        if rendered:
            rec["rendered"] = True
        self._pending.append(rec)
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
        self.in_file += len(self._pending)
        self._pending.clear()

    def roll(self) -> None:
        """Complete the file in progress (handed to ``on_closed``); the next batch starts a new one."""
        self.flush()
        if self.in_file:
            if self.on_closed is not None:
                self.on_closed(self.path)
            self.seq += 1
            self.in_file = 0

    def close(self) -> None:
        self.roll()


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
