"""The sieve: a queue with memory (BUbiNG §3.3, Mercator's "URL-seen test").

Every URL enqueued any number of times comes out of the queue once, in the order it was first
enqueued. Memory is constant in the number of URLs: URLs are buffered in a batch of at most
``batch_size`` fingerprints; a flush sorts the batch and merges it against the sorted on-disk
fingerprint store (:mod:`storage.sieve_store`); URLs not seen before are appended, in first-seen
order, to the on-disk output queue. An LRU cache of recent fingerprints in front of the batch drops
the many repeats of popular URLs (navigation links) without touching the batch.

The output queue is read by byte offset (:meth:`Sieve.read`); the consumer stores the offset it
has consumed atomically with what it did with the URLs (the workbench keeps it in Redis), which is
what makes "dequeued once" hold across a kill -9.
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
        # URLs logged before a crash but never merged come back into the batch.
        replay = self.store.read_pending()
        if replay:
            log.info("sieve: replaying %d pending URLs", len(replay))
            self.batch = replay

    def enqueue(self, urls: list[str]) -> int:
        """Offer URLs; durable (against a process kill) when this returns. Returns how many went
        into the batch (the rest were recent repeats). May flush when the batch is full."""
        accepted = [url for url in urls if not self.cache.repeat(fingerprint(url))] if self.cache.size else list(urls)
        self.store.log_pending(accepted)
        self.batch.extend(accepted)
        if len(self.batch) >= self.batch_size:
            self.flush()
        return len(accepted)

    def flush(self) -> int:
        """Merge the batch into the store; append the URLs never seen before to the output queue.
        Returns the number of new URLs."""
        batch, self.batch = self.batch, []
        fps = np.fromiter((fingerprint(u) for u in batch), dtype=np.uint64, count=len(batch))
        uniq, first = np.unique(fps, return_index=True)  # sorted distinct + first occurrence
        fresh = self.store.merge(uniq)
        new_idx = np.sort(first[fresh])  # back to first-seen order
        new_urls = [batch[i] for i in new_idx]
        self.store.commit(new_urls)
        log.debug("sieve flush: %d offered, %d new, store %d", len(batch), len(new_urls), self.store.fps)
        return len(new_urls)

    def read(self, offset: int, n: int) -> tuple[list[str], int]:
        """Up to ``n`` URLs of the output queue from byte ``offset``, and the next offset.
        Flushes first when the committed queue is exhausted and the batch is not empty."""
        if offset >= self.store.queue_bytes and self.batch:
            self.flush()
        return self.store.read_queue(offset, n)

    @property
    def end(self) -> int:
        """Byte offset of the end of the committed output queue."""
        return self.store.queue_bytes

    def stats(self) -> dict[str, int]:
        return {"seen": self.store.fps, "batch": len(self.batch), "queue_bytes": self.store.queue_bytes,
                "cache_hits": self.cache.hits}

    def exhausted(self, offset: int) -> bool:
        """Nothing left to read from ``offset`` and nothing buffered."""
        return offset >= self.store.queue_bytes and not self.batch

    def close(self) -> None:
        self.store.close()

