"""An agent's part of the crawl's sieve: one :class:`actors.frontier.sieve.Sieve` per host shard it owns.

Hosts fall into :data:`policies.assignment.SHARDS` shards; each shard has its own sieve directory
``OUT/sieve/<shard>`` (fingerprint store, output queue, pending log) and its own consumed offset in
Redis (``P soff``). A shard is what moves when agents join or leave (actors/cluster/membership.py): the
old owner closes the directory, the new one opens it — the pending log replays what was enqueued
but not merged, the offset says what was already distributed — so a host's seen-set and queued
URLs move with it, and no URL is lost or emitted twice across the move.

The LRU cache of recent fingerprints and the batch threshold are shared by the agent's shards: a
flush merges every shard with a batch, so memory and the number of merges do not grow with the
number of shards an agent owns.

In a focused crawl every shard has one output queue per priority level — Mercator's front queues
(seed 001) — and :meth:`SieveShards.read_front` draws the level of each URL it hands out with the
randomised bias of :class:`policies.front_queues.FrontQueueSelector`; each queue has its own
consumed offset in Redis under its id (:func:`policies.front_queues.queue_id`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from raycrawl import durable
from raycrawl.actors.frontier.sieve import RecentSet, Sieve, fingerprint
from raycrawl.policies.assignment import shard_of
from raycrawl.policies.front_queues import DEFAULT_BIAS, FrontQueueSelector, queue_id
from raycrawl.servers import server_of
from raycrawl.storage import shard_log
from raycrawl.storage.dedup_store import DedupShards

log = logging.getLogger(__name__)

NEVER = 1 << 62  # a shard never flushes on its own: SieveShards decides when


class SieveShards:
    """Queue with memory over the shards ``shards`` of ``root``. Single writer per shard."""

    def __init__(self, root: str | Path, shards: Iterable[int], batch_size: int = 100_000,
                 cache_size: int = 200_000, on_log: Callable[[dict[int, list[bytes]]], None] | None = None) -> None:
        """``on_log``: called with each shard's log entries (storage/shard_log.py) before what they
        record is acknowledged (``agent_dir``: the shards' logs in Redis)."""
        self.root = Path(root)
        self.batch_size = batch_size
        self.cache = RecentSet(cache_size)
        self.sieves: dict[int, Sieve] = {}
        self.on_log = on_log
        self._turn = 0
        self._selector: FrontQueueSelector | None = None
        self.take(shards)

    # --- ownership -----------------------------------------------------------------------------------
    def take(self, shards: Iterable[int], replay: dict[int, list[bytes]] | None = None) -> None:
        """Open shards (their pending URLs come back into the batch); ``replay``: the log entries of
        taken shards to apply on top of their files (a dead owner's, storage/shard_log.py)."""
        for s in shards:
            if s not in self.sieves:
                self.sieves[s] = Sieve(self.root / f"{s:02d}", batch_size=NEVER, cache_size=0)
        for s, entries in (replay or {}).items():
            for entry in shard_log.parse(entries):
                if isinstance(entry, shard_log.Enqueued):
                    self.sieves[s].enqueue(entry.urls, entry.levels)
                elif isinstance(entry, shard_log.Flushed):
                    self.sieves[s].flush()

    def give(self, shards: Iterable[int]) -> None:
        """Close shards for another agent to open; their batches stay in the pending logs."""
        for s in shards:
            sieve = self.sieves.pop(s, None)
            if sieve is not None:
                sieve.close()

    def owned(self) -> list[int]:
        return sorted(self.sieves)

    # --- the queue -----------------------------------------------------------------------------------
    def enqueue(self, urls: list[str], levels: list[int] | None = None) -> int:
        """Offer URLs of hosts in owned shards, with their priority levels (None: all 0); durable
        (against a machine crash too) when this returns. Returns how many were not recent repeats. A URL of a shard not owned
        here is a routing bug: ValueError."""
        by_shard: dict[int, tuple[list[str], list[int]]] = {}
        for i, url in enumerate(urls):
            if not self.cache.repeat(fingerprint(url)):
                batch = by_shard.setdefault(shard_of(server_of(url)), ([], []))
                batch[0].append(url)
                batch[1].append(levels[i] if levels is not None else 0)
        foreign = set(by_shard) - set(self.sieves)
        if foreign:
            for url in (u for s in foreign for u in by_shard[s][0]):
                self.cache.forget(fingerprint(url))
            raise ValueError(f"URLs of shards {sorted(foreign)} sent to an agent that does not own them")
        for s, (batch, lvls) in by_shard.items():
            self.sieves[s].enqueue(batch, lvls)
        if self.on_log is not None:
            self.on_log({s: [shard_log.enqueued(batch, lvls)] for s, (batch, lvls) in by_shard.items()})
        if self.batched() >= self.batch_size:
            self.flush()
        # One pass over the pending logs this call wrote, on disk before the call is acknowledged.
        durable.each(lambda s: self.sieves[s].store.sync(), list(by_shard))
        return sum(len(b) for b, _ in by_shard.values())

    def requeue(self, urls: list[str], levels: list[int], tag: int) -> int:
        """Put seen URLs of owned shards (a periodic crawl's revisits) in their queues again, once
        for pass ``tag`` per shard (:meth:`storage.sieve_store.SieveStore.requeue`). Returns how
        many were queued now (0: queued before, e.g. by the run a crash ended)."""
        by_shard: dict[int, tuple[list[str], list[int]]] = {s: ([], []) for s in self.sieves}
        for url, level in zip(urls, levels, strict=True):
            shard = shard_of(server_of(url))
            if shard not in by_shard:
                raise ValueError(f"URL of shard {shard} sent to an agent that does not own it")
            by_shard[shard][0].append(url)
            by_shard[shard][1].append(level)
        return sum(len(batch) for s, (batch, lvls) in by_shard.items()
                   if self.sieves[s].store.requeue(batch, lvls, tag))

    def batched(self) -> int:
        return sum(len(s.batch) for s in self.sieves.values())

    def flush(self) -> int:
        """Merge every shard's batch (shards apart: their fsyncs go together)."""
        flushing = [s for s, sv in self.sieves.items() if sv.batch]
        new = sum(durable.each(lambda s: self.sieves[s].flush(), flushing))
        if self.on_log is not None and flushing:
            self.on_log({s: [shard_log.FLUSH] for s in flushing})
        return new

    def read(self, offsets: dict[int, int], n: int) -> tuple[list[str], dict[int, int]]:
        """Up to ``n`` URLs of level 0 from the owned shards' output queues, each from its offset
        in ``offsets`` (shard → byte offset, 0 if absent), taking turns among shards so no shard
        starves; and the shards' new offsets. Flushes when every queue is read to its end."""
        urls, _, qids, ends = self.read_front(offsets, n)
        return urls, dict(zip(qids, ends, strict=True))

    def read_front(self, offsets: dict[int, int], n: int, levels: int = 1, bias: float = DEFAULT_BIAS
                   ) -> tuple[list[str], list[int], list[int], list[int]]:
        """Up to ``n`` URLs from the owned shards' front queues of ``levels`` levels, each queue
        read from its offset in ``offsets`` (queue id → byte offset, 0 if absent): each URL's level
        drawn with the biased selector, shards taking turns within a level. Returns the URLs,
        their levels, their queues' ids and the offset just after each (a prefix of the URLs
        moves each queue's offset to the last of its URLs in the prefix). Flushes when every queue
        is read to its end."""
        got = self._read_front(offsets, n, levels, bias)
        if not got[0] and self.batched():
            self.flush()
            got = self._read_front(offsets, n, levels, bias)
        return got

    def _read_front(self, offsets: dict[int, int], n: int, levels: int, bias: float
                    ) -> tuple[list[str], list[int], list[int], list[int]]:
        owned = self.owned()
        urls: list[str] = []
        lvls: list[int] = []
        qids: list[int] = []
        ends: list[int] = []
        if not owned:
            return urls, lvls, qids, ends
        self._turn = (self._turn + 1) % len(owned)
        order = owned[self._turn:] + owned[:self._turn]
        if levels == 1:  # no choice to draw (an unfocused crawl): one level's queues, shards in turn
            for url, qid, end in self._fill(order, 0, dict(offsets), n):
                urls.append(url)
                qids.append(qid)
                ends.append(end)
            return urls, [0] * len(urls), qids, ends
        if self._selector is None or (self._selector.levels, self._selector.bias) != (levels, bias):
            self._selector = FrontQueueSelector(levels, bias, seed=None)
        pos = dict(offsets)
        avail = self._available(order, pos, levels)
        top = max((lvl for lvl in range(levels) if avail[lvl]), default=-1)
        if max((sv.batch_top for sv in self.sieves.values()), default=-1) > top:
            # Links of a higher level than any readable wait in the batch: merge them now, as
            # Mercator's front queues would have them at once (the batch flushes otherwise only
            # when it is full or everything is read).
            self.flush()
            avail = self._available(order, pos, levels)
        pools: dict[int, deque] = {}
        while len(urls) < n:
            lvl = self._selector.pick(avail)
            if lvl is None:
                break
            pool = pools.get(lvl)
            if not pool:
                pool = pools[lvl] = self._fill(order, lvl, pos, n - len(urls))
                if not pool:
                    avail[lvl] = 0
                    continue
            url, qid, end = pool.popleft()
            urls.append(url)
            lvls.append(lvl)
            qids.append(qid)
            ends.append(end)
        return urls, lvls, qids, ends

    def _available(self, order: list[int], pos: dict[int, int], levels: int) -> list[int]:
        """1 for each level with URLs left to read in some shard, else 0."""
        return [int(any(pos.get(queue_id(s, lvl), 0) < self.sieves[s].store.end(lvl) for s in order))
                for lvl in range(levels)]

    def _fill(self, order: list[int], level: int, pos: dict[int, int], want: int) -> deque:
        """Up to ``want`` URLs of ``level``, shards taking turns, from (and advancing) ``pos``."""
        ready = [s for s in order if pos.get(queue_id(s, level), 0) < self.sieves[s].store.end(level)]
        out: deque = deque()
        share = max(16, want // max(1, len(ready)))
        for s in ready:
            if len(out) >= want:
                break
            qid = queue_id(s, level)
            got, after = self.sieves[s].store.read_queue_ends(pos.get(qid, 0), min(share, want - len(out)), level)
            if after:
                pos[qid] = after[-1]
            out.extend(zip(got, [qid] * len(got), after, strict=True))
        return out

    def exhausted(self, offsets: dict[int, int]) -> bool:
        """Every front queue of every owned shard read to its end (``offsets``: queue id → offset)
        and nothing buffered."""
        return all(not sv.batch and all(offsets.get(queue_id(s, lvl), 0) >= end for lvl, end in sv.ends().items())
                   for s, sv in self.sieves.items())

    def stats(self) -> dict[str, int]:
        sieves = self.sieves.values()
        return {"seen": sum(s.store.fps for s in sieves), "batch": self.batched(),
                "queue_bytes": sum(sum(s.ends().values()) for s in sieves), "cache_hits": self.cache.hits, "shards": len(self.sieves)}

    def close(self) -> None:
        self.give(list(self.sieves))


class SieveKeeper:
    """The keeper of an agent's shards, as its worker process carries it (actors/cluster/crew_worker.py):
    beside their sieves it serves their duplicate stores (storage/dedup_store.py), which move with
    them (``take``/``give``); other agents reach them through actors/visit/duplicates.py. Restarted
    after a crash, it reopens the shards the map in Redis gives its agent (pending logs replayed),
    and every call is idempotent (offsets, dedup), so a retried call loses nothing.

    ``dedup_meta``: the near-duplicate parameters every store must have (None: no near-duplicate
    index). ``out_store`` (with ``agent_dir``): the shards are logged in Redis and checkpointed to
    the store every ``checkpoint_seconds`` (storage/shard_log.py, storage/shard_handoff.py);
    ``restarted``: this process replaces one that crashed."""

    def __init__(self, root: str, redis_url: str, prefix: str, agent: str, batch_size: int, cache_size: int,
                 dedup_meta: dict[str, str] | None = None, out_store: str | None = None,
                 checkpoint_seconds: float = 0.0, restarted: bool = False) -> None:
        from raycrawl.redis_server import connect
        from raycrawl.storage.redis_frontier import RedisFrontier

        self.f = RedisFrontier(connect(redis_url), prefix, view=agent, register=False)
        mine = [s for s, a in self.f.shard_owners().items() if a == agent]
        self.checkpoints = None
        if out_store is not None:
            from raycrawl.storage.out_store import OutStore
            from raycrawl.storage.shard_handoff import ShardCheckpoints

            self.checkpoints = ShardCheckpoints(OutStore(out_store), self.f, Path(root).parent, checkpoint_seconds)
        self.sieve = SieveShards(root, mine, batch_size, cache_size,
                                 on_log=self.f.log_shards if out_store is not None else None)
        self.dedup = DedupShards(root, mine)
        if dedup_meta is not None:
            self.dedup.set_meta(dedup_meta)
        if self.checkpoints is not None and restarted:
            # The crash may have cut a call between its files and its log entry (an enqueue's,
            # a flush's): what the files hold now becomes the shards' checkpoint, so that a
            # successor never replays a log that disagrees with them (Ray retries the call).
            self.checkpoints.run(self.sieve.owned())

    def _checkpoint(self) -> None:
        if self.checkpoints is not None and self.checkpoints.due():
            self.checkpoints.run(self.sieve.owned())

    def enqueue(self, urls: list[str], levels: list[int] | None = None) -> int:
        self._checkpoint()
        return self.sieve.enqueue(urls, levels)

    def read_front(self, offsets: dict[int, int], n: int, levels: int = 1, bias: float = DEFAULT_BIAS
                   ) -> tuple[list[str], list[int], list[int], list[int]]:
        self._checkpoint()
        return self.sieve.read_front(offsets, n, levels, bias)

    def take(self, shards: list[int], replay: list[int] = ()) -> None:
        """Open ``shards``; those of ``replay`` were a dead holder's: their logs are applied."""
        self.sieve.take(shards, self.f.shard_logs(list(replay)) if replay else None)
        self.dedup.take(shards)

    def give(self, shards: list[int]) -> None:
        self.sieve.give(shards)
        self.dedup.give(shards)

    def close(self) -> None:
        self.sieve.close()
        self.dedup.close()
