"""Sketch store: the contract of the crawl-time near-duplicate index's state, and its in-memory form.

Only cluster **representatives** are stored (a page found to be a near-duplicate is never
added), and for each one only what a later query needs:

* its MinHash sketch: ``num_perm`` values truncated to their low 8, 16 or 32 bits (b-bit
  MinHash; little-endian bytes — 512 B with the crawl-time default of 512 × 8 bits);
* its ``bands`` LSH band keys (unsigned 64-bit each), each pointing at the representative's id;
* its URL.

A representative's id is a 63-bit hash of its URL (:func:`rep_id`): any agent computes it, so no
counter is shared, and checking a representative again after a restart finds it under the same id.

A store answers :meth:`~MemorySketchStore.lookup_bands`, :meth:`~MemorySketchStore.representatives`
and :meth:`~MemorySketchStore.add`. :class:`MemorySketchStore` keeps them in process memory (tests,
benchmarks, offline use); a crawl's index is kept on the agents' disks, sharded
(storage/dedup_store.py, reached through actors/visit/duplicates.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import xxhash


def rep_id(url: str) -> int:
    """A representative's id: the 63-bit hash of its URL (SQLite's INTEGER is signed)."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8")) >> 1


class MemorySketchStore:
    """Representatives in process memory (lost on restart)."""

    def __init__(self, dtype: str = "<u4") -> None:
        self.dtype = np.dtype(dtype)
        self._band: dict[int, int] = {}
        self._rep: dict[int, tuple[bytes, str]] = {}

    def lookup_bands(self, keys: Sequence[int]) -> dict[int, int]:
        """Band key → representative id, for the keys stored."""
        return {k: self._band[k] for k in keys if k in self._band}

    def representatives(self, ids: Iterable[int]) -> dict[int, tuple[np.ndarray, str]]:
        """id → (sketch, URL) for the ids that exist."""
        return {i: (np.frombuffer(self._rep[i][0], dtype=self.dtype), self._rep[i][1]) for i in ids if i in self._rep}

    def add(self, reps: Sequence[tuple[int, str, np.ndarray, Sequence[int]]]) -> None:
        """Store (id, url, sketch, band keys) tuples. A band key already taken keeps its owner."""
        for rid, url, sketch, keys in reps:
            self._rep[rid] = (np.ascontiguousarray(sketch, dtype=self.dtype).tobytes(), url)
            for k in keys:
                self._band.setdefault(k, rid)

    def count(self) -> int:
        return len(self._rep)

    def close(self) -> None:
        pass
