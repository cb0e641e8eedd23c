"""Host → agent assignment by consistent hashing (UbiCrawler/BUbiNG): no leader, and when an
agent joins or leaves only the hosts of its arcs on the ring move.

Each agent owns ``replicas`` points on a 64-bit ring (xxh3 of "agent#i"); a host belongs to the
first agent point clockwise from xxh3(host). With 200 points per agent the largest share is
within ~10% of the mean for a handful of agents.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import xxhash


def _h(key: str) -> int:
    return xxhash.xxh3_64_intdigest(key.encode("utf-8"))


class ConsistentHash:
    """Immutable ring; ``with_agent``/``without_agent`` return new rings (cheap to rebuild)."""

    def __init__(self, agents: Iterable[str], replicas: int = 200) -> None:
        self.agents = tuple(sorted(set(agents)))
        if not self.agents:
            raise ValueError("a ring needs at least one agent")
        self.replicas = replicas
        points = sorted((_h(f"{a}#{i}"), a) for a in self.agents for i in range(replicas))
        self._keys = [p for p, _ in points]
        self._owners = [a for _, a in points]

    def owner(self, host: str) -> str:
        """The agent that crawls ``host`` (scheme://host[:port] or bare host: callers must be consistent)."""
        i = bisect.bisect_right(self._keys, _h(host))
        return self._owners[i % len(self._keys)]

    def partition(self, hosts: Iterable[str]) -> dict[str, list[str]]:
        """Hosts grouped by owner (every agent present, possibly with an empty list)."""
        out: dict[str, list[str]] = {a: [] for a in self.agents}
        for h in hosts:
            out[self.owner(h)].append(h)
        return out

    def with_agent(self, agent: str) -> ConsistentHash:
        return ConsistentHash((*self.agents, agent), self.replicas)

    def without_agent(self, agent: str) -> ConsistentHash:
        return ConsistentHash((a for a in self.agents if a != agent), self.replicas)


# Hosts are grouped in SHARDS shards (xxh3 of the host); a shard is the unit that moves between
# agents, with its sieve directory and its hosts' Redis state (actors/frontier/sieve_shards.py).
SHARDS = 64


def shard_of(host: str) -> int:
    """The shard of ``host``, a server (a host name whatever the scheme and port: :mod:`raycrawl.servers`)."""
    return _h(host) % SHARDS


def assign_shards(agents: Iterable[str], previous: dict[int, str] | None = None,
                  shards: int = SHARDS) -> dict[int, str]:
    """Shard → agent by consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018):
    each shard walks the ring clockwise from its own point and takes the first agent with fewer
    than ceil(shards / agents) shards. A shard whose ``previous`` owner is still an agent and has
    room stays there, so a join moves only the newcomer's share and a leave only the leaver's."""
    ring = ConsistentHash(agents)
    cap = -(-shards // len(ring.agents))
    load = dict.fromkeys(ring.agents, 0)
    out: dict[int, str] = {}
    for s in range(shards):
        old = (previous or {}).get(s)
        if old in load and load[old] < cap:
            out[s] = old
            load[old] += 1
    for s in range(shards):
        if s in out:
            continue
        i = bisect.bisect_right(ring._keys, _h(f"shard#{s}"))
        for j in range(len(ring._keys)):
            a = ring._owners[(i + j) % len(ring._keys)]
            if load[a] < cap:
                break
        out[s] = a
        load[a] += 1
    return out


def apply_shards(f, shards: dict[int, str]) -> int:
    """Make the frontier ``f`` (a :class:`storage.redis_frontier.RedisFrontier`) agree with
    ``shards`` (shard → agent): every known host whose shard has another owner moves to that owner's view, views of agents no longer in the map are dropped, and the
    map is stored (``P shards``). Only while no agent fetches. Returns the number of hosts moved."""
    agents = set(shards.values())
    f.register(sorted(agents))
    moved = f.move_hosts([(h, shards[shard_of(h)]) for h, a in f.owned_hosts() if shards[shard_of(h)] != a])
    for agent in {f.view_agent(v) for v in f.views()} - agents:
        f.drop_view(agent)
    f.set_shard_owners(shards)
    return moved
