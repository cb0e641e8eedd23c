"""Distributed termination: when a crawl with no leader is over.

Every agent that has nothing to do (fetchers idle, its sieve exhausted, its view of the workbench
empty) marks itself idle at the current value of the crawl's activity counter (``P activity``), or
``done`` when its budget share is spent. The crawl is over when every agent's mark is that same
value (or ``done``) and nothing is in flight. Every commit bumps the counter *after* its links are
durable in their owners' sieves, so an agent that saw itself idle before links reached it holds a
stale mark until it looks again, and the crawl cannot end under it.
"""

from __future__ import annotations

from collections.abc import Callable

from raycrawl.storage.redis_frontier import RedisFrontier


class Termination:
    def __init__(self, frontier: RedisFrontier, agent: str) -> None:
        self.f, self.agent = frontier, agent
        self.budget_ended = False  # the crawl ended with some agent's budget share spent

    def done(self) -> None:
        """This agent's budget share is spent: it counts as idle from now on."""
        self.f.mark_idle(self.agent, "done")

    def all_idle(self, agents: list[str], sieve_exhausted: Callable[[], bool]) -> bool:
        """True when the whole crawl is over (the caller saw its own fetchers idle)."""
        act = self.f.activity()
        c = self.f.counts(view_only=True)
        if not (c["virtualized"] == 0 and c["front"] == 0 and sieve_exhausted()):
            return False
        self.f.mark_idle(self.agent, act)
        marks = self.f.idle_marks(agents)
        if not all(m == b"done" or m == act for m in marks):
            return False
        # In flight = acquired and not yet committed (failures: recorded, not committed), also when a fetcher holds the result in its
        # buffer after releasing the host (the caller's idle statuses may be that old).
        c = self.f.counts()
        quiet = c["hosts_busy"] == c["inflight"] == c["failing"] == 0 and act == self.f.activity()
        # URLs still queued that belong to agents whose budget share is spent wait for a --resume:
        # everyone else is idle with nothing of its own, so the crawl's budget is spent too.
        self.budget_ended = any(m == b"done" for m in marks)
        return quiet and (self.budget_ended or c["queued"] == c["virtualized"] == 0)
