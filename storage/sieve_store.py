"""The sieve's on-disk state: a sorted fingerprint store, the output queue and a pending log.

Layout under ``SIEVE_DIR`` (all written only by :class:`actors.sieve.Sieve`):

================ =================================================================================
file             content
================ =================================================================================
``meta.json``    the commit point: ``{"gen": g, "fps": n, "queue_bytes": b}``, replaced atomically
``fps.<g>``      n sorted distinct 64-bit fingerprints (xxh3_64 of the URL), little-endian uint64
``queue``        every URL that ever came out of the sieve, one per line, in first-seen order
``pending.<g>``  URLs enqueued since generation g was committed, one per line (replayed on restart)
================ =================================================================================

A flush of generation g appends the new URLs to ``queue``, writes ``fps.<g+1>`` (a streaming
sorted merge, so memory does not grow with the store), creates ``pending.<g+1>`` and then replaces
``meta.json``. A crash before the replace leaves generation g intact: ``queue`` is truncated back
to ``queue_bytes`` and ``pending.<g>`` is replayed, so no URL is lost and none is emitted twice.
Readers address the queue by byte offset; who has consumed what is the consumer's business.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import xxhash

from raycrawl.atomic import replace_bytes

log = logging.getLogger(__name__)


def fingerprint(url: str) -> int:
    """A URL's key in the fingerprint store."""
    return xxhash.xxh3_64_intdigest(url.encode())

CHUNK = 1 << 20  # fingerprints per merge step: 8 MB of RAM whatever the store size


class ShardFiles:
    """The file names of one sieve directory (the table above): the one place that spells them,
    for the store and for the consistency check (storage/crawl_check.py)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.meta = self.dir / "meta.json"
        self.queue = self.dir / "queue"

    def fps(self, gen: int) -> Path:
        return self.dir / f"fps.{gen}"

    def pending(self, gen: int) -> Path:
        return self.dir / f"pending.{gen}"

    def all_fps(self) -> list[Path]:
        return sorted(self.dir.glob("fps.*"))

    def pending_gens(self) -> list[int]:
        return sorted(int(p.suffix[1:]) for p in self.dir.glob("pending.*") if p.suffix[1:].isdigit())

    def read_meta(self) -> dict[str, int]:
        """The commit point (``gen``, ``fps``, ``queue_bytes``); zeros before the first commit.
        A damaged one raises ValueError/KeyError/TypeError/UnicodeDecodeError."""
        if not self.meta.exists():
            return {"gen": 0, "fps": 0, "queue_bytes": 0}
        meta = json.loads(self.meta.read_text())
        return {k: int(meta[k]) for k in ("gen", "fps", "queue_bytes")}

    def write_meta(self, gen: int, fps: int, queue_bytes: int) -> None:
        """Replace the commit point atomically."""
        replace_bytes(self.meta, json.dumps({"gen": gen, "fps": fps, "queue_bytes": queue_bytes}).encode())


class SieveStore:
    """Files of one sieve. Not safe for concurrent writers (one sieve owns its directory)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.files = ShardFiles(self.dir)
        meta = self.files.read_meta()
        self.gen: int = meta["gen"]
        self.fps: int = meta["fps"]
        self.queue_bytes: int = meta["queue_bytes"]
        with open(self.files.queue, "ab") as f:
            # URLs appended by a flush that never committed: drop them, the pending log has them.
            if f.tell() > self.queue_bytes:
                log.info("sieve: dropping %d uncommitted queue bytes", f.tell() - self.queue_bytes)
            f.truncate(self.queue_bytes)
        self._pending = open(self.pending_path(self.gen), "ab")  # noqa: SIM115 - lives as long as the store

    def pending_path(self, gen: int) -> Path:
        return self.files.pending(gen)

    def fps_path(self, gen: int) -> Path:
        return self.files.fps(gen)

    # --- pending log ---------------------------------------------------------------------------------
    def log_pending(self, urls: list[str]) -> None:
        """Append URLs to the pending log (survives a kill of this process once returned)."""
        if urls:
            self._pending.write(("\n".join(urls) + "\n").encode())
            self._pending.flush()

    def read_pending(self) -> list[str]:
        """URLs logged since the last commit; a torn last line (killed mid-write) is ignored."""
        data = self.pending_path(self.gen).read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            log.warning("sieve: ignoring a torn pending line")
            with open(self.pending_path(self.gen), "ab") as f:
                f.truncate(end)
        return data[:end].decode().splitlines() if end else []

    # --- commit --------------------------------------------------------------------------------------
    def merge(self, new_fps: np.ndarray) -> np.ndarray:
        """Given sorted distinct fingerprints, return a boolean mask of those NOT in the store,
        and write the merged store as generation gen+1 (not yet committed)."""
        assert new_fps.dtype == np.uint64 and (len(new_fps) < 2 or bool(np.all(new_fps[1:] > new_fps[:-1])))
        fresh = np.ones(len(new_fps), dtype=bool)
        out_path = self.fps_path(self.gen + 1)
        old = np.memmap(self.fps_path(self.gen), dtype="<u8", mode="r") if self.fps else np.empty(0, np.uint64)
        j = 0
        written = 0
        with open(out_path, "wb") as out:
            for start in range(0, len(old), CHUNK):
                chunk = np.asarray(old[start : start + CHUNK])
                k = int(np.searchsorted(new_fps, chunk[-1], side="right"))
                part = new_fps[j:k]
                if len(part):
                    pos = np.searchsorted(chunk, part)
                    hit = chunk[np.minimum(pos, len(chunk) - 1)] == part
                    fresh[j:k] = ~hit
                    merged = np.concatenate([chunk, part[~hit]])
                    merged.sort(kind="stable")  # two sorted runs: a linear merge
                else:
                    merged = chunk
                out.write(merged.astype("<u8").tobytes())
                written += len(merged)
                j = k
            tail = new_fps[j:]
            out.write(tail.astype("<u8").tobytes())
            written += len(tail)
        del old
        self._next_fps = written
        return fresh

    def commit(self, new_urls: list[str]) -> None:
        """Append ``new_urls`` to the queue and make generation gen+1 (written by :meth:`merge`)
        current, atomically with respect to a crash."""
        with open(self.files.queue, "ab") as f:
            if new_urls:
                f.write(("\n".join(new_urls) + "\n").encode())
            queue_bytes = f.tell()
        gen = self.gen + 1
        self.pending_path(gen).touch()
        self.files.write_meta(gen, self._next_fps, queue_bytes)  # the commit point
        self._pending.close()
        for stale in (self.fps_path(self.gen), self.pending_path(self.gen)):
            stale.unlink(missing_ok=True)
        self.gen, self.fps, self.queue_bytes = gen, self._next_fps, queue_bytes
        self._pending = open(self.pending_path(gen), "ab")  # noqa: SIM115

    # --- queue ---------------------------------------------------------------------------------------
    def read_queue(self, offset: int, n: int) -> tuple[list[str], int]:
        """Up to ``n`` URLs starting at byte ``offset`` of the committed queue, and the offset
        just after them."""
        assert 0 <= offset <= self.queue_bytes, (offset, self.queue_bytes)
        urls: list[str] = []
        with open(self.files.queue, "rb") as f:
            f.seek(offset)
            while len(urls) < n and offset < self.queue_bytes:
                line = f.readline()
                offset += len(line)
                urls.append(line.decode().rstrip("\n"))
        return urls, offset

    def iter_fps(self) -> Iterator[np.ndarray]:
        if self.fps:
            old = np.memmap(self.fps_path(self.gen), dtype="<u8", mode="r")
            for start in range(0, len(old), CHUNK):
                yield np.asarray(old[start : start + CHUNK])

    def close(self) -> None:
        self._pending.close()
