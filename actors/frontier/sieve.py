"""The sieve: a queue with memory (BUbiNG §3.3, Mercator's "URL-seen test").

Every URL enqueued any number of times comes out of the queue once, in the order it was first
enqueued. Memory is constant in the number of URLs: URLs are buffered in a batch of at most
``batch_size`` fingerprints; a flush sorts the batch and merges it against the sorted on-disk
fingerprint store (:mod:`storage.sieve_store`); URLs not seen before are appended, in first-seen
order, to the on-disk output queue. An LRU cache of recent fingerprints in front of the batch drops
the many repeats of popular URLs (navigation links) without touching the batch.

The output queue is read by byte offset (:meth:`Sieve.read`); the consumer stores the offset it
has consumed atomically with what it did with the URLs (the workbench keeps it in Redis), which is
what makes "dequeued once" hold across a kill -9. A URL may come with a priority level (a focused
crawl): it then comes out of that level's queue — Mercator's front queues — with the level of its
first enqueueing (:mod:`storage.sieve_store`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path

import numpy as np

from raycrawl.storage.sieve_store import SieveStore, fingerprint

log = logging.getLogger(__name__)

__all__ = ["RecentSet", "Sieve", "fingerprint"]


class RecentSet:
    """The last ``size`` fingerprints seen (LRU): drops repeats of popular URLs cheaply."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.fps: OrderedDict[int, None] = OrderedDict()
        self.hits = 0

    def repeat(self, fp: int) -> bool:
        """True if ``fp`` was seen recently; otherwise remember it."""
        if fp in self.fps:
            self.fps.move_to_end(fp)
            self.hits += 1
            return True
        self.fps[fp] = None
        if len(self.fps) > self.size:
            self.fps.popitem(last=False)
        return False

    def forget(self, fp: int) -> None:
        self.fps.pop(fp, None)


class Sieve:
    """A queue with memory on disk. Single writer; all methods are synchronous."""

    def __init__(self, directory: str | Path, batch_size: int = 100_000, cache_size: int = 200_000) -> None:
        assert batch_size > 0 and cache_size >= 0
        self.store = SieveStore(directory)
        self.batch_size = batch_size
        self.cache = RecentSet(cache_size)
        self.batch: list[str] = []
        self.batch_levels: list[int] = []
        self.batch_top = -1  # the highest level in the batch
        # URLs logged before a crash but never merged come back into the batch.
        replay, levels = self.store.read_pending()
        if replay:
            log.info("sieve: replaying %d pending URLs", len(replay))
            self.batch, self.batch_levels, self.batch_top = replay, levels, max(levels)

    def enqueue(self, urls: list[str], levels: list[int] | None = None) -> int:
        """Offer URLs (with their priority levels; None: all 0); durable (against a process kill)
        when this returns. Returns how many went into the batch (the rest were recent repeats).
        May flush when the batch is full."""
        if levels is None:
            levels = [0] * len(urls)
        if self.cache.size:
            keep = [i for i, url in enumerate(urls) if not self.cache.repeat(fingerprint(url))]
            urls, levels = [urls[i] for i in keep], [levels[i] for i in keep]
        self.store.log_pending(urls, levels)
        self.batch.extend(urls)
        self.batch_levels.extend(levels)
        if levels:
            self.batch_top = max(self.batch_top, max(levels))
        if len(self.batch) >= self.batch_size:
            self.flush()
        return len(urls)

    def flush(self) -> int:
        """Merge the batch into the store; append the URLs never seen before to their levels'
        output queues. Returns the number of new URLs."""
        batch, self.batch = self.batch, []
        levels, self.batch_levels, self.batch_top = self.batch_levels, [], -1
        fps = np.fromiter((fingerprint(u) for u in batch), dtype=np.uint64, count=len(batch))
        uniq, first = np.unique(fps, return_index=True)  # sorted distinct + first occurrence
        fresh = self.store.merge(uniq)
        new_idx = np.sort(first[fresh]).tolist()  # back to first-seen order
        new_urls = [batch[i] for i in new_idx]
        self.store.commit(new_urls, [levels[i] for i in new_idx])
        log.debug("sieve flush: %d offered, %d new, store %d", len(batch), len(new_urls), self.store.fps)
        return len(new_urls)

    def read(self, offset: int, n: int) -> tuple[list[str], int]:
        """Up to ``n`` URLs of the level-0 output queue from byte ``offset``, and the next offset
        (levels: :meth:`actors.frontier.sieve_shards.SieveShards.read_front`). Flushes first when the
        committed queue is exhausted and the batch is not empty."""
        if offset >= self.store.queue_bytes and self.batch:
            self.flush()
        return self.store.read_queue(offset, n)

    @property
    def end(self) -> int:
        """Byte offset of the end of the committed level-0 output queue."""
        return self.store.queue_bytes

    def ends(self) -> dict[int, int]:
        """Level → end of its committed output queue."""
        return self.store.ends

    def stats(self) -> dict[str, int]:
        return {"seen": self.store.fps, "batch": len(self.batch), "queue_bytes": self.store.queue_bytes,
                "cache_hits": self.cache.hits}

    def exhausted(self, offset: int | dict[int, int]) -> bool:
        """Nothing left to read from ``offset`` (level 0's, or level → offset) and nothing buffered."""
        offsets = {0: offset} if isinstance(offset, int) else offset
        return not self.batch and all(offsets.get(lvl, 0) >= end for lvl, end in self.store.ends.items())

    def close(self) -> None:
        self.store.close()

