"""The crew's worker: one process carrying an agent's sieve keeper (its host shards' sieves and
duplicate stores, actors/frontier/sieve_shards.py) and its parsing worker (parser, store writer and
summary writer, actors/visit/parsing_worker.py).

Each role keeps its class; what they share is the process, and Ray's threads: the sieve's calls in
one (they were a single-threaded actor's), parses in another, writes in a third, so an ``enqueue``
never waits behind a parse, nor a parse behind a write's fsyncs (which release the GIL). The sieve
had a process of its own: every crawl paid ~1 s of CPU to start it (a Ray worker and its imports,
measured) before its first request, and the agent's loop calls the two roles one after the other
anyway. The actor is named after the agent (:func:`actors.frontier.link_router.sieve_actor_name`):
other agents find its sieve by that name.

Ray restarts it after a crash and retries the call it was serving: the sieve keeper reopens its
shards (pending logs replayed; every call idempotent), the writers start new files (never after a
torn tail), and the agent commits a batch only after its write returned, so nothing is lost.
"""

from __future__ import annotations

import warnings

from raycrawl.actors.frontier.sieve_shards import SieveKeeper
from raycrawl.actors.visit.parser import ParseResult
from raycrawl.actors.visit.parsing_worker import ParsingWorker
from raycrawl.actors.visit.store_writer import Stored, StoreItem
from raycrawl.exchange import FetchResult
from raycrawl.policies.front_queues import DEFAULT_BIAS
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import join_run, layout


def actor_class():  # noqa: ANN201 - a Ray actor class, built lazily
    """The Ray actor shell (built lazily so importing this module does not import Ray)."""
    import ray

    from raycrawl.actors import named, per_batch
    from raycrawl.actors.visit.shingler import near_dup_meta

    # Parses keep their order, and writes theirs; the agent sends a batch's write only once it has
    # its parse. Methods without a group (the sieve's) run in Ray's default group, one at a time.
    @ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1, concurrency_groups={"parse": 1, "write": 1})
    @named
    class CrewWorker:
        def __init__(self, crawl_dir: str, redis_url: str, agent: str, settings: Settings) -> None:
            s = settings
            self.run_lock = join_run(crawl_dir)  # storage/crawl_dir.py, "Workers"
            with warnings.catch_warnings():  # (Ray 2.60's property reads its own deprecated actor_id:
                warnings.simplefilter("ignore", DeprecationWarning)  # a warning on every crawl's stderr)
                restarted = ray.get_runtime_context().was_current_actor_reconstructed
            self.keeper = SieveKeeper(
                str(layout(crawl_dir).sieve), redis_url, s.redis_prefix, agent, s.sieve_batch, s.url_cache,
                near_dup_meta() if s.near_dup else None, s.out_store if s.agent_dir else None,
                s.checkpoint_seconds, restarted=restarted)
            self.worker = ParsingWorker(crawl_dir, agent, s)

        # --- the sieve (actors/frontier/sieve_shards.py) --------------------------------------------
        @per_batch
        def enqueue(self, urls: list[str], levels: list[int] | None = None) -> int:
            return self.keeper.enqueue(urls, levels)

        @per_batch
        def requeue(self, urls: list[str], levels: list[int], tag: int) -> int:
            return self.keeper.sieve.requeue(urls, levels, tag)

        @per_batch
        def read(self, offsets: dict[int, int], n: int) -> tuple[list[str], dict[int, int]]:
            return self.keeper.sieve.read(offsets, n)

        @per_batch
        def read_front(self, offsets: dict[int, int], n: int, levels: int = 1, bias: float = DEFAULT_BIAS
                       ) -> tuple[list[str], list[int], list[int], list[int]]:
            return self.keeper.read_front(offsets, n, levels, bias)

        @per_batch
        def exhausted(self, offsets: dict[int, int]) -> bool:
            return self.keeper.sieve.exhausted(offsets)

        def take(self, shards: list[int], replay: list[int] = ()) -> None:
            self.keeper.take(shards, replay)

        def give(self, shards: list[int]) -> None:
            self.keeper.give(shards)

        @per_batch
        def stats(self) -> dict[str, int]:
            return self.keeper.sieve.stats()

        # --- the shards' duplicate stores (storage/dedup_store.py; actors/visit/duplicates.py) ------
        @per_batch
        def dedup_claim(self, by_shard: dict[int, list[tuple[bytes, str]]]) -> dict[int, list[str]]:
            return self.keeper.dedup.claim(by_shard)

        @per_batch
        def dedup_bands(self, by_shard: dict[int, list[int]]) -> dict[int, int]:
            return self.keeper.dedup.bands(by_shard)

        @per_batch
        def dedup_reps(self, by_shard: dict[int, list[int]]) -> dict[int, tuple[bytes, str]]:
            return self.keeper.dedup.reps(by_shard)

        @per_batch
        def dedup_add(self, by_shard: dict[int, tuple[list, list]]) -> None:
            self.keeper.dedup.add(by_shard)

        @per_batch
        def dedup_counts(self) -> dict[str, int]:
            return self.keeper.dedup.counts()

        # --- the parsing worker (actors/visit/parsing_worker.py) ------------------------------------
        @per_batch(group="parse")
        def parse(self, batch: list[FetchResult], works: dict | None = None) -> tuple[list[ParseResult], dict]:
            return self.worker.parse(batch, works)

        @per_batch(group="write")
        def write_batch(self, items: list[StoreItem], summarise: list[str] | None = None) -> Stored:
            return self.worker.write_batch(items, summarise)

        @ray.method(concurrency_group="write")
        def ship(self, timeout: float | None = None) -> Stored:
            return self.worker.ship(timeout)

        @ray.method(concurrency_group="write")
        def close(self) -> None:
            """Close the writers, then the shards (called once the crawl no longer uses either)."""
            try:
                self.worker.close()
            finally:
                self.keeper.close()

    return CrewWorker
