"""The sieve's on-disk state: a sorted fingerprint store, the output queue and a pending log.

Layout under ``SIEVE_DIR`` (all written only by :class:`actors.frontier.sieve.Sieve`):

================ =================================================================================
file             content
================ =================================================================================
``meta.json``    the commit point: ``{"gen": g, "fps": n, "queue_bytes": b, "levels": {ℓ: b_ℓ},
                 "requeued": k}``, replaced atomically (``levels``: the committed bytes of the
                 queues of levels ≥ 1; ``requeued``: the last pass of a periodic crawl whose
                 revisits were put in the queues)
``fps.<g>``      n sorted distinct 64-bit fingerprints (xxh3_64 of the URL), little-endian uint64
``queue``        every URL of priority level 0 that ever came out of the sieve, one per line, in
                 first-seen order
``queue.<ℓ>``    the same for priority level ℓ ≥ 1 (a focused crawl's front queues, seed 001's
                 Mercator: policies/front_queues.py)
``pending.<g>``  URLs enqueued since generation g was committed, one per line, ``url`` or
                 ``url<TAB>level`` (replayed on restart)
================ =================================================================================

A URL keeps the level it was first enqueued with. A flush of generation g appends the new URLs to
their level's queue, writes ``fps.<g+1>`` (a streaming sorted merge, so memory does not grow with
the store), creates ``pending.<g+1>`` and then replaces ``meta.json``. A crash before the replace
leaves generation g intact: every queue is truncated back to its committed bytes and
``pending.<g>`` is replayed, so no URL is lost and none is emitted twice. Readers address a queue
by byte offset; who has consumed what is the consumer's business.

Durable against a machine crash (a power cut, a VM's host failing), not only a kill: the queues'
new bytes, ``fps.<g+1>`` and the new ``meta.json`` are fsynced before the replace returns, and the
directory after it, so an offset a reader got (and Redis keeps) never points past what survives;
the pending log is fsynced by :meth:`SieveStore.sync`, which the sieve calls before an enqueue
returns (actors/frontier/sieve_shards.py) — the links it vouches for to the commit that waits on it.

A periodic crawl's pass puts the URLs it revisits — seen, so the fingerprints would stop them —
straight into the queues (:meth:`SieveStore.requeue`), committed with the pass number in the same
``meta.json`` replace: once per pass whatever crashes, and a link to such a URL found during the
pass is still a repeat.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import xxhash

from raycrawl import durable
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

    def level_queue(self, level: int) -> Path:
        """The output queue of priority ``level`` (level 0: ``queue``)."""
        return self.queue if level == 0 else self.dir / f"queue.{level}"

    def level_queues(self) -> dict[int, Path]:
        """Level → queue file, for every queue file present."""
        found = {0: self.queue} if self.queue.exists() else {}
        for q in self.dir.glob("queue.*"):
            if q.suffix[1:].isdigit():
                found[int(q.suffix[1:])] = q
        return dict(sorted(found.items()))

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

    def read_ends(self) -> dict[int, int]:
        """Level → committed bytes of its queue (level 0 always present)."""
        if not self.meta.exists():
            return {0: 0}
        meta = json.loads(self.meta.read_text())
        ends = {0: int(meta["queue_bytes"])}
        ends.update({int(lvl): int(b) for lvl, b in (meta.get("levels") or {}).items()})
        return ends

    def read_requeued(self) -> int:
        """The last pass whose revisits were queued (0: none)."""
        return int(json.loads(self.meta.read_text()).get("requeued", 0)) if self.meta.exists() else 0

    def write_meta(self, gen: int, fps: int, queue_bytes: int | dict[int, int], requeued: int = 0) -> None:
        """Replace the commit point atomically (``queue_bytes``: level 0's, or level → bytes)."""
        ends = queue_bytes if isinstance(queue_bytes, dict) else {0: queue_bytes}
        meta: dict = {"gen": gen, "fps": fps, "queue_bytes": ends.get(0, 0)}
        if any(lvl for lvl in ends):
            meta["levels"] = {str(lvl): b for lvl, b in sorted(ends.items()) if lvl}
        if requeued:
            meta["requeued"] = requeued
        replace_bytes(self.meta, json.dumps(meta).encode(), durable=True)


class SieveStore:
    """Files of one sieve. Not safe for concurrent writers (one sieve owns its directory)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        made = not self.dir.is_dir()
        if made:
            self.dir.mkdir(parents=True)
            durable.sync_dir(self.dir.parent)
        self.files = ShardFiles(self.dir)
        meta = self.files.read_meta()
        self.gen: int = meta["gen"]
        self.fps: int = meta["fps"]
        self.ends: dict[int, int] = self.files.read_ends()  # level → committed queue bytes
        self.requeued = self.files.read_requeued()
        for lvl, path in {**self.files.level_queues(), 0: self.files.queue}.items():
            committed = self.ends.get(lvl, 0)
            with open(path, "ab") as f:
                # URLs appended by a flush that never committed: drop them, the pending log has them.
                if f.tell() > committed:
                    log.info("sieve: dropping %d uncommitted queue bytes (level %d)", f.tell() - committed, lvl)
                f.truncate(committed)
        made = made or not self.pending_path(self.gen).exists()
        self._pending = open(self.pending_path(self.gen), "ab")  # noqa: SIM115 - lives as long as the store
        self._unsynced = False  # pending URLs logged since the last sync()
        if made:  # the names of the files just made (the first enqueue syncs only their contents)
            durable.sync_dir(self.dir)

    def pending_path(self, gen: int) -> Path:
        return self.files.pending(gen)

    def fps_path(self, gen: int) -> Path:
        return self.files.fps(gen)

    @property
    def queue_bytes(self) -> int:
        """Committed bytes of the level-0 queue."""
        return self.ends.get(0, 0)

    def end(self, level: int = 0) -> int:
        return self.ends.get(level, 0)

    # --- pending log ---------------------------------------------------------------------------------
    def log_pending(self, urls: list[str], levels: list[int] | None = None) -> None:
        """Append URLs (with their levels) to the pending log (survives a kill of this process once
        returned)."""
        if urls:
            lines = urls if levels is None else [f"{u}\t{lvl}" if lvl else u for u, lvl in zip(urls, levels, strict=True)]
            self._pending.write(("\n".join(lines) + "\n").encode())
            self._pending.flush()
            self._unsynced = True

    def sync(self) -> None:
        """Make the pending URLs logged so far durable against a machine crash, not only a kill."""
        if self._unsynced:
            durable.sync_file(self._pending)
            self._unsynced = False

    def read_pending(self) -> tuple[list[str], list[int]]:
        """URLs logged since the last commit and their levels; a torn last line (killed mid-write)
        is ignored."""
        data = self.pending_path(self.gen).read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            log.warning("sieve: ignoring a torn pending line")
            with open(self.pending_path(self.gen), "ab") as f:
                f.truncate(end)
        urls, levels = [], []
        for line in data[:end].decode().splitlines() if end else ():
            url, _, lvl = line.partition("\t")
            urls.append(url)
            levels.append(int(lvl) if lvl.isdigit() else 0)
        return urls, levels

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
            durable.sync_file(out)  # (its name: with the commit's directory sync)
        del old
        self._next_fps = written
        return fresh

    def _append(self, urls: list[str], levels: list[int] | None) -> dict[int, int]:
        """Append URLs to their levels' queues (not committed); the queues' new ends."""
        by_level: dict[int, list[str]] = {}
        if levels is None:
            by_level[0] = urls
        else:
            for url, lvl in zip(urls, levels, strict=True):
                by_level.setdefault(lvl, []).append(url)
        ends = dict(self.ends)
        for lvl, batch in by_level.items():
            with open(self.files.level_queue(lvl), "ab") as f:
                f.truncate(ends.get(lvl, 0))  # nothing uncommitted may stay in front of the new URLs
                if batch:
                    f.write(("\n".join(batch) + "\n").encode())
                ends[lvl] = f.tell()
                durable.sync_file(f)
        return ends

    def requeue(self, urls: list[str], levels: list[int], tag: int) -> bool:
        """Put seen URLs in their levels' queues again, once for pass ``tag`` (False: that pass's
        were queued already), committed atomically with the tag."""
        if tag <= self.requeued:
            return False
        ends = self._append(urls, levels)
        self.files.write_meta(self.gen, self.fps, ends, tag)
        self.ends, self.requeued = ends, tag
        return True

    def commit(self, new_urls: list[str], levels: list[int] | None = None) -> None:
        """Append ``new_urls`` to their levels' queues and make generation gen+1 (written by
        :meth:`merge`) current, atomically with respect to a crash."""
        ends = self._append(new_urls, levels)
        gen = self.gen + 1
        self.pending_path(gen).touch()
        # The commit point, durable: its directory sync also writes the new files' names.
        self.files.write_meta(gen, self._next_fps, ends, self.requeued)
        self._unsynced = False  # the URLs logged so far are in the fingerprints and queues now
        self._pending.close()
        for stale in (self.fps_path(self.gen), self.pending_path(self.gen)):
            stale.unlink(missing_ok=True)
        self.gen, self.fps, self.ends = gen, self._next_fps, ends
        self._pending = open(self.pending_path(gen), "ab")  # noqa: SIM115

    # --- queue ---------------------------------------------------------------------------------------
    def read_queue(self, offset: int, n: int, level: int = 0) -> tuple[list[str], int]:
        """Up to ``n`` URLs starting at byte ``offset`` of the committed queue of ``level``, and
        the offset just after them."""
        urls, ends = self.read_queue_ends(offset, n, level)
        return urls, ends[-1] if ends else offset

    def read_queue_ends(self, offset: int, n: int, level: int = 0) -> tuple[list[str], list[int]]:
        """:meth:`read_queue`, with the offset just after each URL."""
        end = self.ends.get(level, 0)
        assert 0 <= offset <= end, (offset, end, level)
        urls: list[str] = []
        after: list[int] = []
        if offset >= end:
            return urls, after
        with open(self.files.level_queue(level), "rb") as f:
            f.seek(offset)
            while len(urls) < n and offset < end:
                line = f.readline()
                offset += len(line)
                urls.append(line.decode().rstrip("\n"))
                after.append(offset)
        return urls, after

    def iter_fps(self) -> Iterator[np.ndarray]:
        if self.fps:
            old = np.memmap(self.fps_path(self.gen), dtype="<u8", mode="r")
            for start in range(0, len(old), CHUNK):
                yield np.asarray(old[start : start + CHUNK])

    def close(self) -> None:
        self._pending.close()
