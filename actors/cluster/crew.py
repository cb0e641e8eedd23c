"""An agent's crew: the Ray actors one agent runs on its own node (BUbiNG: an agent is one machine).

Its fetch actors and its worker (one process carrying the sieve shards with their duplicate stores,
the parser, the store writer and, with ``summaries_at_crawl``, the summary writer:
actors/cluster/crew_worker.py), each built from its module's ``actor_class()`` and named after the
agent, so that other agents find its sieve and the dashboard shows who is who. Every one restarts after a crash; the
agent recovers what a dead fetch actor held (``Agent._recover_fetchers``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from raycrawl.actors.frontier.link_router import sieve_actor_name
from raycrawl.actors.visit.visit_stage import Outcome
from raycrawl.settings import Settings

log = logging.getLogger(__name__)


DRAIN_WAIT = 0.1  # s the agent's drain waits for a visit to end (the shortest wait: next_wait)
MAX_DRAIN_WAIT = 0.8  # the longest, after rounds that changed nothing


def next_wait(wait: float, changed: bool, statuses: list[dict]) -> float:
    """The agent's next drain wait after a round that waited ``wait``: ``changed`` (visits ended, or
    the distributor moved URLs) and the fetchers' ``statuses``. While nothing changes and every
    visit to come is in the fetchers' hands (in flight, or its host waiting on politeness), the wait
    doubles up to MAX_DRAIN_WAIT: a visit ending still returns a drain at once, and until then the
    round could only find an operator's command or another agent's links (taken up within
    MAX_DRAIN_WAIT). Otherwise (something changed, or nothing is scheduled and the crawl may be
    ending) DRAIN_WAIT. A crawl waiting on politeness made ten rounds a second, each a few Ray and
    Redis calls (~3 % of a core in the driver and the sieve, measured)."""
    pending = any(st["in_flight"] or st["earliest"] is not None for st in statuses)
    return min(MAX_DRAIN_WAIT, max(DRAIN_WAIT, 2 * wait)) if pending and not changed else DRAIN_WAIT


def split_budget(n: int | None, k: int) -> list[int | None]:
    """``n`` pages over ``k`` shares, as evenly as possible (None: no budget)."""
    return [None if n is None else n // k + (i < n % k) for i in range(k)]


class Crew:
    # The first round's drain: nothing is in flight yet, and the first request waits on the step after it.
    first_wait = 0.0

    def __init__(self, settings: Settings, redis_url: str, name: str, budget: int | None) -> None:
        import ray

        from raycrawl.actors.cluster import crew_worker
        from raycrawl.actors.fetch import fetch_loop

        s, tag = settings, f"{settings.redis_prefix}{name}"
        out = Path(s.out)
        here = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
        self.name, self.wait = name, self.first_wait
        self.round_seconds, self.drained = s.drain_linger, time.monotonic()
        self.budgeted = bool(s.max_pages)  # failures count against a page budget like fetched pages
        # Without a shared OUT the store writer works in pieces of this many seconds (store_writer.py).
        self.ship_seconds = s.ship_seconds if s.agent_dir else 0.0
        self.summaries = s.summaries_at_crawl
        # One process carries the sieve and the parsing worker (actors/cluster/crew_worker.py):
        # ``sieve`` and ``worker`` are the same actor, named so that other agents find its sieve.
        self.worker = crew_worker.actor_class().options(
            name=sieve_actor_name(s.redis_prefix, name), scheduling_strategy=here).remote(str(out), redis_url, name, s)
        self.sieve = self.worker
        fetch_actor = fetch_loop.actor_class()
        self.fetchers = [fetch_actor.options(name=f"raycrawl-fetch-{tag}-{i}", scheduling_strategy=here).remote(
                             s, redis_url, b, name)
                         for i, b in enumerate(split_budget(budget, s.fetch_actors))]
        ray.get([f.start.remote() for f in self.fetchers])

    def drain(self, max_items: int) -> tuple[list[Outcome], list[dict]]:
        """Finished visits from every fetch actor, and their statuses (raises RayActorError when
        one died)."""
        import ray

        outcomes: list[Outcome] = []
        statuses: list[dict] = []
        # A round lasts at least ``drain_linger``: one that took less (a crawl waiting on
        # politeness: a visit or two a round) waits the rest for more visits, as each round costs
        # a few Ray and Redis calls in every process whatever it carries. A fast crawl's rounds
        # take longer than that (0.3-0.5 s for a batch at 600 pages/s): it never waits.
        linger = max(0.0, self.round_seconds - (time.monotonic() - self.drained))
        for batch, status in ray.get([f.drain_with_status.remote(max_items, self.wait, linger)
                                      for f in self.fetchers]):
            outcomes += batch
            statuses.append(status)
        self.drained = time.monotonic()
        return outcomes, statuses

    def pace(self, changed: bool, statuses: list[dict]) -> None:
        """Set the next drain's wait (:func:`next_wait`)."""
        self.wait = next_wait(self.wait, changed, statuses)

    def stop_fetching(self) -> list[Outcome]:
        """Stop every fetch actor (each finishes its fetches and releases their hosts); the visits
        they hand over. One that does not answer is skipped: its URLs stay in the in-flight set,
        which recover_view or --resume put back."""
        import ray

        rest: list[Outcome] = []
        stops = [f.stop.remote() for f in self.fetchers]
        for f, stop in zip(self.fetchers, stops, strict=True):
            try:
                ray.get(stop, timeout=60)
                rest += ray.get(f.drain.remote(10**9, 0, 0), timeout=60)
            except ray.exceptions.RayError:
                log.warning("agent %s: a fetch actor did not answer while stopping", self.name)
        return rest

    def start_fetchers(self, budget: int | None) -> None:
        """(Re)start every fetch actor with an even split of ``budget``, waiting for Ray to have
        restarted the dead ones."""
        import ray

        deadline = time.time() + 120
        for f, b in zip(self.fetchers, split_budget(budget, len(self.fetchers)), strict=True):
            while True:
                try:
                    ray.get([f.set_budget.remote(b), f.start.remote()], timeout=60)
                    break
                except ray.exceptions.RayError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.5)

    def set_budget(self, budget: int | None) -> None:
        import ray

        ray.get([f.set_budget.remote(b) for f, b in zip(self.fetchers, split_budget(budget, len(self.fetchers)),
                                                         strict=True)])

    def close(self) -> None:
        """Close the stores and the sieve, then end every actor of the crew."""
        import ray

        try:  # (its outcome read, so Ray reports no error as unhandled)
            ray.get(self.worker.close.remote())
        except ray.exceptions.RayTaskError as exc:
            if isinstance(getattr(exc, "cause", None), OSError):
                log.warning("agent %s: closing a store failed: %s", self.name, exc.cause)
            else:
                log.exception("agent shutdown incomplete")
        except Exception:  # noqa: BLE001 - report what we have; the in-flight set covers the rest
            log.exception("agent shutdown incomplete")
        for actor in [*self.fetchers, self.worker]:
            ray.kill(actor)
