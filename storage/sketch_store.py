"""Sketch store: the durable state of the crawl-time near-duplicate index.

Only cluster **representatives** are stored (a page found to be a near-duplicate is never
added), and for each one only what a later query needs:

* its MinHash sketch: ``num_perm`` values truncated to their low 8, 16 or 32 bits (b-bit
  MinHash; little-endian bytes — 512 B with the crawl-time default of 512 × 8 bits);
* its ``bands`` LSH band keys (64-bit each), each pointing at the representative's integer id;
* its URL.

Redis layout (``P`` is the key prefix, ``rc:dedup`` by default):

================ ====== =====================================================================
key              type   content
================ ====== =====================================================================
``P:meta``       hash   num_perm, bands, k, seed, hashing scheme: checked at start-up so a
                        restarted actor never mixes incompatible sketches
``P:next``       string last representative id handed out (INCRBY)
``P:band``       hash   8-byte band key → representative id (first writer wins: HSETNX)
``P:sketch``     hash   representative id → sketch bytes
``P:url``        hash   representative id → URL
================ ====== =====================================================================

Every representative costs ``num_perm·bits/8`` sketch bytes, ``bands`` hash fields of 8 + ~4 bytes
and its URL; ``RedisSketchStore.memory_per_representative`` measures the real figure
(Redis ``MEMORY USAGE``), which docs/dedup.md reports. With AOF on, the state survives a
``kill -9`` of both the actor and the server.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np

from raycrawl.storage.lua_script import LuaScript

log = logging.getLogger(__name__)


class SketchStoreMismatch(ValueError):
    """The stored index was built with different parameters (permutations, bands, k, seed)."""


class MemorySketchStore:
    """The same contract as :class:`RedisSketchStore`, in process memory (lost on restart)."""

    def __init__(self, meta: dict[str, str], dtype: str = "<u4") -> None:
        self.meta = dict(meta)
        self.dtype = np.dtype(dtype)
        self._band: dict[bytes, int] = {}
        self._sketch: dict[int, bytes] = {}
        self._url: dict[int, str] = {}
        self._next = 0

    def lookup_bands(self, keys: Sequence[bytes]) -> list[int | None]:
        """Representative id stored under each band key, or None."""
        return [self._band.get(k) for k in keys]

    def representatives(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, str]]:
        """id → (sketch as uint32 array, URL) for the ids that exist."""
        out = {}
        for i in ids:
            if i in self._sketch:
                out[i] = (np.frombuffer(self._sketch[i], dtype=self.dtype), self._url[i])
        return out

    def reserve_ids(self, count: int) -> int:
        """Reserve ``count`` consecutive ids; returns the first."""
        assert count > 0
        first = self._next + 1
        self._next += count
        return first

    def add(self, reps: Sequence[tuple[int, str, np.ndarray, Sequence[bytes]]]) -> None:
        """Store (id, url, sketch, band keys) tuples. A band key already taken keeps its owner."""
        for rid, url, sketch, keys in reps:
            self._sketch[rid] = np.ascontiguousarray(sketch, dtype=self.dtype).tobytes()
            self._url[rid] = url
            for k in keys:
                self._band.setdefault(k, rid)

    def count(self) -> int:
        return len(self._sketch)

    def close(self) -> None:
        pass


HSETNX_MANY = """
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
"""


class RedisSketchStore:
    """Representatives in Redis (see the module docstring for the layout)."""

    def __init__(self, redis_url: str, key_prefix: str, meta: dict[str, str], dtype: str = "<u4") -> None:
        from raycrawl.redis_server import connect

        self.dtype = np.dtype(dtype)
        self.client = connect(redis_url)
        self.prefix = key_prefix
        self.meta = {k: str(v) for k, v in meta.items()}
        self._hsetnx_many = LuaScript(self.client, HSETNX_MANY)
        self._check_meta()

    def _key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    def _check_meta(self) -> None:
        key = self._key("meta")
        stored = {k.decode(): v.decode() for k, v in self.client.hgetall(key).items()}
        if not stored:
            self.client.hset(key, mapping=self.meta)
            return
        if stored != self.meta:
            raise SketchStoreMismatch(
                f"near-duplicate index at {key} was built with {stored}, not {self.meta}; "
                "use another key prefix or delete the old index"
            )
        log.info("resuming near-duplicate index %s with %d representatives", self.prefix, self.count())

    def lookup_bands(self, keys: Sequence[bytes]) -> list[int | None]:
        if not keys:
            return []
        values = self.client.hmget(self._key("band"), list(keys))
        return [int(v) if v is not None else None for v in values]

    def representatives(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, str]]:
        ids = list(ids)
        if not ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self._key("sketch"), ids)
        pipe.hmget(self._key("url"), ids)
        sketches, urls = pipe.execute()
        return {
            i: (np.frombuffer(s, dtype=self.dtype), u.decode())
            for i, s, u in zip(ids, sketches, urls, strict=True)
            if s is not None and u is not None
        }

    def reserve_ids(self, count: int) -> int:
        assert count > 0
        return int(self.client.incrby(self._key("next"), count)) - count + 1

    def add(self, reps: Sequence[tuple[int, str, np.ndarray, Sequence[bytes]]]) -> None:
        if not reps:
            return
        pipe = self.client.pipeline(transaction=False)
        # Sketch and URL first: a band key must never point at an id whose sketch is missing.
        pipe.hset(
            self._key("sketch"),
            mapping={rid: np.ascontiguousarray(s, dtype=self.dtype).tobytes() for rid, _, s, _ in reps},
        )
        pipe.hset(self._key("url"), mapping={rid: url for rid, url, _, _ in reps})
        # One command for every band key of the batch (HSETNX takes one field; thousands of them
        # in a pipeline cost the agent ~20 ms a batch in redis-py's encoding alone).
        pairs = [x for rid, _, _, keys in reps for k in keys for x in (k, rid)]
        self._hsetnx_many(keys=[self._key("band")], args=pairs, client=pipe)
        pipe.execute()

    def count(self) -> int:
        return int(self.client.hlen(self._key("sketch")))

    def memory_bytes(self) -> int:
        """Bytes Redis uses for this index (``MEMORY USAGE`` of its keys)."""
        total = 0
        for name in ("meta", "next", "band", "sketch", "url"):
            total += int(self.client.memory_usage(self._key(name), samples=0) or 0)
        return total

    def memory_per_representative(self) -> float:
        n = self.count()
        return self.memory_bytes() / n if n else 0.0

    def close(self) -> None:
        self.client.close()
