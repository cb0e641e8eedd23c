"""An agent's part of the crawl's sieve: one :class:`actors.sieve.Sieve` per host shard it owns.

Hosts fall into :data:`policies.assignment.SHARDS` shards; each shard has its own sieve directory
``OUT/sieve/<shard>`` (fingerprint store, output queue, pending log) and its own consumed offset in
Redis (``P soff``). A shard is what moves when agents join or leave (actors/membership.py): the
old owner closes the directory, the new one opens it — the pending log replays what was enqueued
but not merged, the offset says what was already distributed — so a host's seen-set and queued
URLs move with it, and no URL is lost or emitted twice across the move.

The LRU cache of recent fingerprints and the batch threshold are shared by the agent's shards: a
flush merges every shard with a batch, so memory and the number of merges do not grow with the
number of shards an agent owns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from raycrawl.actors.sieve import RecentSet, Sieve, fingerprint
from raycrawl.policies.assignment import shard_of
from raycrawl.storage.crawl_dir import join_run
from raycrawl.urls import split_host

log = logging.getLogger(__name__)

NEVER = 1 << 62  # a shard never flushes on its own: SieveShards decides when


class SieveShards:
    """Queue with memory over the shards ``shards`` of ``root``. Single writer per shard."""

    def __init__(self, root: str | Path, shards: Iterable[int], batch_size: int = 100_000,
                 cache_size: int = 200_000) -> None:
        self.root = Path(root)
        self.batch_size = batch_size
        self.cache = RecentSet(cache_size)
        self.sieves: dict[int, Sieve] = {}
        self._turn = 0
        self.take(shards)

    # --- ownership -----------------------------------------------------------------------------------
    def take(self, shards: Iterable[int]) -> None:
        """Open shards (their pending URLs come back into the batch)."""
        for s in shards:
            if s not in self.sieves:
                self.sieves[s] = Sieve(self.root / f"{s:02d}", batch_size=NEVER, cache_size=0)

    def give(self, shards: Iterable[int]) -> None:
        """Close shards for another agent to open; their batches stay in the pending logs."""
        for s in shards:
            sieve = self.sieves.pop(s, None)
            if sieve is not None:
                sieve.close()

    def owned(self) -> list[int]:
        return sorted(self.sieves)

    # --- the queue -----------------------------------------------------------------------------------
    def enqueue(self, urls: list[str]) -> int:
        """Offer URLs of hosts in owned shards; durable when this returns. Returns how many were
        not recent repeats. A URL of a shard not owned here is a routing bug: ValueError."""
        by_shard: dict[int, list[str]] = {}
        for url in urls:
            if not self.cache.repeat(fingerprint(url)):
                by_shard.setdefault(shard_of(split_host(url)[0]), []).append(url)
        foreign = set(by_shard) - set(self.sieves)
        if foreign:
            for url in (u for s in foreign for u in by_shard[s]):
                self.cache.forget(fingerprint(url))
            raise ValueError(f"URLs of shards {sorted(foreign)} sent to an agent that does not own them")
        for s, batch in by_shard.items():
            self.sieves[s].enqueue(batch)
        if self.batched() >= self.batch_size:
            self.flush()
        return sum(map(len, by_shard.values()))

    def batched(self) -> int:
        return sum(len(s.batch) for s in self.sieves.values())

    def flush(self) -> int:
        return sum(s.flush() for s in self.sieves.values() if s.batch)

    def read(self, offsets: dict[int, int], n: int) -> tuple[list[str], dict[int, int]]:
        """Up to ``n`` URLs from the owned shards' output queues, each from its offset in
        ``offsets`` (shard → byte offset, 0 if absent), taking turns among shards so no shard
        starves; and the shards' new offsets. Flushes when every queue is read to its end."""
        urls, new = self._read(offsets, n)
        if not urls and self.batched():
            self.flush()
            urls, new = self._read(offsets, n)
        return urls, new

    def _read(self, offsets: dict[int, int], n: int) -> tuple[list[str], dict[int, int]]:
        owned = self.owned()
        if not owned:
            return [], {}
        self._turn = (self._turn + 1) % len(owned)
        ready = [s for s in owned[self._turn:] + owned[:self._turn] if offsets.get(s, 0) < self.sieves[s].end]
        urls: list[str] = []
        new: dict[int, int] = {}
        share = max(16, n // max(1, len(ready)))
        for s in ready:
            if len(urls) >= n:
                break
            got, new[s] = self.sieves[s].store.read_queue(offsets.get(s, 0), min(share, n - len(urls)))
            urls += got
        return urls, new

    def exhausted(self, offsets: dict[int, int]) -> bool:
        """Every owned shard read to its end and nothing buffered."""
        return all(offsets.get(s, 0) >= sv.end and not sv.batch for s, sv in self.sieves.items())

    def stats(self) -> dict[str, int]:
        sieves = self.sieves.values()
        return {"seen": sum(s.store.fps for s in sieves), "batch": self.batched(),
                "queue_bytes": sum(s.end for s in sieves), "cache_hits": self.cache.hits, "shards": len(self.sieves)}

    def close(self) -> None:
        self.give(list(self.sieves))


def actor_class():
    """The Ray actor shell (built lazily so importing this module does not import Ray). Ray restarts
    it after a crash and retries the call it was serving: it reopens the shards the map in Redis
    gives its agent (pending logs replayed), and every call is idempotent (offsets, dedup)."""
    import ray

    @ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
    class SieveActor:
        def __init__(self, root: str, redis_url: str, prefix: str, agent: str, batch_size: int,
                     cache_size: int) -> None:
            from raycrawl.redis_server import connect
            from raycrawl.storage.redis_frontier import RedisFrontier

            self.run_lock = join_run(Path(root).parent)  # OUT/sieve; storage/crawl_dir.py, "Workers"
            client = connect(redis_url)
            owners = RedisFrontier(client, prefix, register=False).shard_owners()
            client.close()
            self.sieve = SieveShards(root, [s for s, a in owners.items() if a == agent], batch_size, cache_size)

        def enqueue(self, urls: list[str]) -> int:
            return self.sieve.enqueue(urls)

        def read(self, offsets: dict[int, int], n: int) -> tuple[list[str], dict[int, int]]:
            return self.sieve.read(offsets, n)

        def exhausted(self, offsets: dict[int, int]) -> bool:
            return self.sieve.exhausted(offsets)

        def take(self, shards: list[int]) -> None:
            self.sieve.take(shards)

        def give(self, shards: list[int]) -> None:
            self.sieve.give(shards)

        def stats(self) -> dict[str, int]:
            return self.sieve.stats()

        def close(self) -> None:
            self.sieve.close()

    return SieveActor
