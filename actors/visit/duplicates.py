"""The crawl's duplicate indexes as one agent sees them: sharded across the agents' sieve actors.

A text digest, an LSH band key and a representative's id each fall in one of the crawl's shards
(:func:`storage.dedup_store.shard_of_key`), and a shard's duplicate store is kept by the sieve
actor of the agent owning the shard (actors/frontier/sieve_shards.py), so the indexes grow on the agents'
disks, not in the shared Redis, and a duplicate is found whichever agent fetched the first copy.
Each question is one call per owning agent, all agents asked at once.

An agent that is gone (it died; the membership will give its shards to another) cannot answer: its
digests count as unclaimed and its representatives as absent. That only misses a duplicate — the
page is archived in full — and never declares one falsely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from raycrawl.actors.frontier.link_router import LinkRouter
from raycrawl.policies.assignment import SHARDS
from raycrawl.storage.dedup_store import DedupShards, adds_by_shard, claims_by_shard, shard_of_key

Ask = Callable[[str, dict[int, Any]], "list[Any] | None"]


def ask_actors(router: LinkRouter, sieve: Any) -> Ask:
    """Questions for the shards' keepers: one call of ``dedup_<method>`` per owning agent's sieve
    actor (``sieve``: this agent's own), all at once; None when one is gone."""

    def ask(method: str, by_shard: dict[int, Any]) -> list[Any] | None:
        import ray

        by_owner: dict[str, dict[int, Any]] = {}
        for s, part in by_shard.items():
            by_owner.setdefault(router.shard_owner(s), {})[s] = part
        own = by_owner.pop(router.name, None)
        mine = getattr(sieve, "dedup_" + method).remote(own) if own is not None else None
        calls = {owner: lambda peer, p=part: getattr(peer, "dedup_" + method).remote(p)
                 for owner, part in by_owner.items()}
        theirs = router.ask_peers(calls, sieve) if calls else []
        answers = dict(zip(by_owner, theirs or [], strict=False))
        if mine is not None:
            answers[router.name] = ray.get(mine)
        if theirs is None:  # (LinkRouter.ask_peers said so, once)
            return None
        return [answers[owner] for owner in [*([router.name] if own is not None else []), *by_owner]]

    return ask


def ask_local(shards: DedupShards) -> Ask:
    """Questions for stores this process holds (every shard's: tests, benchmarks)."""
    return lambda method, by_shard: [getattr(shards, method)(by_shard)]


class ShardedDuplicates:
    """Exact-duplicate claims, and the near-duplicate index's sketch store (the contract of
    :class:`storage.sketch_store.MemorySketchStore`), over the shards' duplicate stores."""

    def __init__(self, ask: Ask, dtype: str = "<u1") -> None:
        """``ask``: how a question reaches the shards' stores (:func:`ask_actors` in a crawl);
        ``dtype``: the stored sketches' (the crawl-time 8-bit values)."""
        self.ask, self.dtype = ask, np.dtype(dtype)

    def _ask(self, method: str, by_shard: dict[int, Any]) -> list[Any] | None:
        return self.ask(method, by_shard) if by_shard else []

    # --- exact duplicates --------------------------------------------------------------------------
    def claim_digests(self, claims: Sequence[tuple[bytes, str]]) -> list[str]:
        """(digest, owner description): the first claim of a digest owns it, for every agent;
        returns each digest's owner description, the caller's or an earlier one."""
        by_shard = claims_by_shard(claims, SHARDS)
        answers = self._ask("claim", by_shard)
        if answers is None:
            return [owner for _, owner in claims]
        owners: dict[int, list[str]] = {}
        for answer in answers:
            owners.update(answer)
        taken = {s: iter(owners[s]) for s in by_shard}
        return [next(taken[shard_of_key(digest, SHARDS)]) for digest, _ in claims]

    # --- the near-duplicate index's store ----------------------------------------------------------
    def lookup_bands(self, keys: Sequence[int]) -> dict[int, int]:
        by_shard: dict[int, list[int]] = {}
        for k in keys:
            by_shard.setdefault(shard_of_key(k, SHARDS), []).append(k)
        found: dict[int, int] = {}
        for answer in self._ask("bands", by_shard) or []:
            found.update(answer)
        return found

    def representatives(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, str]]:
        by_shard: dict[int, list[int]] = {}
        for i in ids:
            by_shard.setdefault(shard_of_key(i, SHARDS), []).append(i)
        out: dict[int, tuple[np.ndarray, str]] = {}
        for answer in self._ask("reps", by_shard) or []:
            out.update({i: (np.frombuffer(sketch, dtype=self.dtype), url) for i, (sketch, url) in answer.items()})
        return out

    def add(self, reps: Sequence[tuple[int, str, np.ndarray, Sequence[int]]]) -> None:
        """(id, URL, sketch, band keys): each representative goes to its id's shard, each band key
        to the key's shard; durable when this returns."""
        by_shard = adds_by_shard(((rid, url, np.ascontiguousarray(sketch, dtype=self.dtype).tobytes(), keys)
                                  for rid, url, sketch, keys in reps), SHARDS)
        self._ask("add", by_shard)

    def close(self) -> None:
        pass
