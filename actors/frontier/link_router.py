"""The link router: which agent owns a URL, and delivering links to the owners' sieves.

Hosts fall in shards and each shard belongs to one agent (:mod:`policies.assignment`). Links to
hosts this agent owns go to its own sieve; links owned elsewhere are batched to the owner's sieve
actor (the crew's worker, named ``raycrawl-worker-<prefix><agent>``) behind a cache of recently sent URLs, so the
navigation links every page repeats cross the network once (UbiCrawler's and BUbiNG's habit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from raycrawl.actors.frontier.sieve import RecentSet, fingerprint
from raycrawl.policies.assignment import shard_of
from raycrawl.servers import server_of

log = logging.getLogger(__name__)

# Recently sent URLs an agent does not send again to another agent's sieve (navigation links).
SENT_CACHE = 100_000
# Seconds another agent's sieve may take to answer before this agent holds the batch (and skips that
# agent for as long): a lost VM answers nothing, not even a reset, and Ray retries calls to its
# actors until it declares them dead, a minute later. Held batches go when the membership changes.
PEER_PATIENCE = 5.0


def sieve_actor_name(prefix: str, agent: str) -> str:
    """The name of the actor carrying ``agent``'s sieve (its crew's worker, actors/cluster/crew_worker.py)."""
    return f"raycrawl-worker-{prefix}{agent}"


class LinkRouter:
    """Routes one agent's links. ``shards``: shard → agent for every agent of the crawl."""

    def __init__(self, name: str, prefix: str, shards: dict[int, str]) -> None:
        self.name = name
        self.prefix = prefix
        self.sent = RecentSet(SENT_CACHE)
        self.peers: dict[str, Any] = {}  # other agents' sieve actors
        self.set_shards(shards)

    def set_shards(self, shards: dict[int, str]) -> None:
        self.shards = dict(shards)
        self.agents = sorted(set(self.shards.values()) | {self.name})
        self.my_shards = sorted(s for s, a in self.shards.items() if a == self.name)
        self.peers = {}
        self.silent: dict[str, float] = {}  # agent -> time.monotonic() until which it is not asked

    def owner(self, url: str) -> str:
        return self.shard_owner(shard_of(server_of(url)))

    def shard_owner(self, shard: int) -> str:
        return self.shards[shard] if len(self.agents) > 1 else self.name

    def sieve_of(self, agent: str, own: Any) -> Any:
        """``agent``'s sieve actor (``own``: this agent's)."""
        import ray

        if agent == self.name:
            return own
        if agent not in self.peers:
            self.peers[agent] = ray.get_actor(sieve_actor_name(self.prefix, agent))
        return self.peers[agent]

    def ask_peers(self, calls: dict[str, Callable[[Any], Any]], own: Any) -> list[Any] | None:
        """Call other agents' sieves (agent -> a function of its sieve actor giving an ObjectRef):
        their answers, in order; None when one is gone, or silent for PEER_PATIENCE s (then it is
        not asked again for as long: a lost node costs one wait, not one a batch)."""
        import ray

        now = time.monotonic()
        if any(self.silent.get(agent, 0) > now for agent in calls):
            return None
        try:
            refs = {agent: call(self.sieve_of(agent, own)) for agent, call in calls.items()}
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PEER_PATIENCE)
            if len(ready) < len(refs):
                for agent, ref in refs.items():
                    if ref not in ready:
                        self.silent[agent] = time.monotonic() + PEER_PATIENCE
                        log.warning("agent %s: agent %s's sieve did not answer in %.0f s; batches with links to it "
                                    "are held, duplicates of their pages may be missed", self.name, agent,
                                    PEER_PATIENCE)
                return None
            return ray.get(list(refs.values()))
        except (ray.exceptions.RayActorError, ValueError) as exc:
            log.warning("agent %s: another agent's sieve is gone (%s); batches with links to it are held, "
                        "duplicates of their pages may be missed", self.name, str(exc).splitlines()[0])
            self.peers.clear()
            for agent in calls:  # (which one is not said): asked again after the patience
                self.silent.setdefault(agent, time.monotonic() + PEER_PATIENCE)
            return None

    def deliver(self, sieve, urls: list[str], levels: list[int] | None = None, cache: bool = True) -> bool:
        """Offer links, with their priority levels (None: all 0), to their owners' sieves
        (``sieve``: ours, directly; others' in one batch each, minus the URLs sent recently) and
        wait until they are durable there. False if another agent's sieve is gone (that agent
        died): the caller keeps the batch uncommitted until the membership change gives its shards
        to a live agent."""
        import ray

        if len(self.agents) == 1:
            ray.get(sieve.enqueue.remote(urls, levels))
            return True
        by_owner: dict[str, tuple[list[str], list[int]]] = {}
        for i, url in enumerate(urls):
            owner = self.owner(url)
            if owner != self.name and cache and self.sent.repeat(fingerprint(url)):
                continue
            batch = by_owner.setdefault(owner, ([], []))
            batch[0].append(url)
            batch[1].append(levels[i] if levels is not None else 0)
        mine = sieve.enqueue.remote(*by_owner.pop(self.name, ([], [])))
        calls = {owner: lambda peer, b=batch, lv=lvls: peer.enqueue.remote(b, lv)
                 for owner, (batch, lvls) in by_owner.items()}
        delivered = not calls or self.ask_peers(calls, sieve) is not None
        if not delivered:  # held; not known to be sent: send again, to the new owners
            for url in urls:
                self.sent.forget(fingerprint(url))
        ray.get(mine)
        return delivered
