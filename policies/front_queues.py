"""Mercator's front queues: K priority levels and the randomised, biased choice among them (seed 001).

A URL enters the front queue of its priority level, 0 (lowest) … K − 1 (highest). URLs leave the
front queues one at a time: a level is drawn at random among the non-empty ones, level ``ℓ`` with
weight ``bias ** ℓ``, and its oldest URL goes next. A higher level is thus more likely, never
certain: low-priority URLs are delayed, not starved. ``bias`` = 1 is a uniform choice; a large
``bias`` approaches strict priority. The same selector drives the live frontier (the sieve's
per-level output queues, :mod:`actors.frontier.sieve_shards`) and the simulated one
(:mod:`policies.frontier_policy`), so a focus policy behaves alike in both.

In a workbench visit state (a back queue) a URL's level travels as a suffix of its path,
``path<TAB>level`` (no suffix: level 0); a tab is never part of a canonical URL (the WHATWG URL
parser strips it), so the two cannot be confused, and the suffix survives the virtualizer's files
and the in-flight set exactly as the path does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

LEVEL_SEP = "\t"
DEFAULT_BIAS = 2.0


def with_level(path: str, level: int) -> str:
    """The visit-state entry of ``path`` queued at ``level``."""
    return f"{path}{LEVEL_SEP}{level}" if level else path


def split_level(entry: str) -> tuple[str, int]:
    """(path, level) of a visit-state entry (the inverse of :func:`with_level`)."""
    path, sep, level = entry.rpartition(LEVEL_SEP)
    if not sep or not level.isdigit():
        return entry, 0
    return path, int(level)


class FrontQueueSelector:
    """Draws front-queue levels with a bias toward higher priority (deterministic given ``seed``)."""

    def __init__(self, levels: int, bias: float = DEFAULT_BIAS, seed: int | None = 0) -> None:
        if levels < 1:
            raise ValueError("levels must be >= 1")
        if not bias >= 1.0:
            raise ValueError("front-queue bias must be >= 1")
        self.levels = levels
        self.bias = bias
        self.weights = [bias ** lvl for lvl in range(levels)]
        self.rng = random.Random(seed)

    def pick(self, available: Sequence[int]) -> int | None:
        """A level among those with ``available[level] > 0`` (None if all are empty)."""
        if self.levels == 1:
            return 0 if available[0] > 0 else None
        total = 0.0
        for lvl in range(self.levels):
            if available[lvl] > 0:
                total += self.weights[lvl]
        if total == 0.0:
            return None
        x = self.rng.random() * total
        last = None
        for lvl in range(self.levels - 1, -1, -1):
            if available[lvl] > 0:
                last = lvl
                x -= self.weights[lvl]
                if x < 0:
                    return lvl
        return last  # rounding: the lowest non-empty level

    def plan(self, available: Sequence[int], n: int) -> list[int]:
        """How many URLs to take from each level for the next ``n`` (URL-by-URL draws, a level
        leaving the draw once its ``available`` URLs are all taken)."""
        left = list(available)
        take = [0] * self.levels
        for _ in range(n):
            lvl = self.pick(left)
            if lvl is None:
                break
            take[lvl] += 1
            left[lvl] -= 1
        return take


def queue_id(shard: int, level: int) -> int:
    """The id of one sieve shard's front queue of ``level``: its consumed offset lives in Redis
    under this id (``P soff:<id>``); level 0's id is the shard number, as before levels existed."""
    from raycrawl.policies.assignment import SHARDS

    return level * SHARDS + shard


def queue_of(qid: int) -> tuple[int, int]:
    """(shard, level) of a front-queue id (inverse of :func:`queue_id`)."""
    from raycrawl.policies.assignment import SHARDS

    return qid % SHARDS, qid // SHARDS
