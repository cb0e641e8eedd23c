"""Index updates over a network (seed 004 §5.3): the crawler sends the hashes of a new version's
fragments, the index answers with a bit vector of the ones it lacks, and only those fragments'
words travel. A replaced version releases its fragments; fragments no version uses are deleted.

:class:`IndexUpdater` is the index side (plain, synchronously testable); :func:`actor_class`
wraps it as a Ray actor — the "remote index actor". :class:`UpdateClient` is the crawler side.
Fragment hashes are shared collection-wide (global sharing); :meth:`IndexUpdater.index` produces
the searchable :class:`FragmentIndex` under any policy — the periodic merge in which fragIDs are
renumbered by (primary page, ordinal), as the paper suggests.
"""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np

from raycrawl.storage.fragment_index import FragmentIndex
from raycrawl.winnowing import DEFAULT_B, DEFAULT_W, fragment_hash, fragments

log = logging.getLogger(__name__)


class IndexUpdater:
    """The index end of the update protocol: a fragment store plus each version's fragment hashes."""

    def __init__(self, b: int = DEFAULT_B, w: int = DEFAULT_W) -> None:
        self.b, self.w = b, w
        self.fragments: dict[int, list[str]] = {}   # hash → words
        self.refs: Counter = Counter()               # hash → versions using it (with repeats)
        self.pages: dict[str, dict[int, list[int]]] = {}  # url → {epoch: fragment hashes}
        self.bytes_received = 0

    def params(self) -> tuple[int, int]:
        """(b, w): the client must cut pages exactly as the index does."""
        return self.b, self.w

    def missing(self, hashes: list[int]) -> bytes:
        """Phase 1: a bit vector (numpy packbits order) with bit i set when ``hashes[i]`` is unknown."""
        self.bytes_received += 8 * len(hashes)
        return np.packbits(np.array([h not in self.fragments for h in hashes], dtype=bool)).tobytes()

    def add_version(self, url: str, epoch: int, hashes: list[int], new_fragments: dict[int, list[str]]) -> int:
        """Phase 2: store the version (replacing any version of ``url`` at ``epoch``); returns the
        number of fragments stored. ``KeyError`` when a hash is neither known nor sent."""
        self.bytes_received += sum(len(" ".join(ws)) + 8 for ws in new_fragments.values())
        for h, words in new_fragments.items():
            assert fragment_hash(words) == h, "fragment content does not match its hash"
            self.fragments.setdefault(h, words)
        unknown = [h for h in hashes if h not in self.fragments]
        if unknown:
            raise KeyError(f"{len(unknown)} fragment(s) of {url} neither indexed nor sent")
        versions = self.pages.setdefault(url, {})
        if epoch in versions:
            self._release(versions[epoch])
        versions[epoch] = list(hashes)
        self.refs.update(hashes)
        return len(new_fragments)

    def remove_version(self, url: str, epoch: int) -> int:
        """Drop a version; returns how many fragments became unused and were deleted."""
        versions = self.pages.get(url, {})
        if epoch not in versions:
            return 0
        deleted = self._release(versions.pop(epoch))
        if not versions:
            del self.pages[url]
        return deleted

    def _release(self, hashes: list[int]) -> int:
        self.refs.subtract(hashes)
        dead = [h for h in set(hashes) if self.refs[h] <= 0]
        for h in dead:
            del self.refs[h]
            del self.fragments[h]
        return len(dead)

    def versions(self) -> dict[str, dict[int, list[str]]]:
        """Every stored version's terms, reassembled from its fragments."""
        return {u: {e: [w for h in hs for w in self.fragments[h]] for e, hs in vs.items()}
                for u, vs in self.pages.items()}

    def index(self, policy: str = "global") -> FragmentIndex:
        """The merged, searchable index of everything stored."""
        from raycrawl.tasks.index_build import build_index

        return build_index(self.versions(), policy, self.b, self.w)


class UpdateClient:
    """The crawler end: ``push`` one version with the two-phase exchange; counts bytes sent."""

    def __init__(self, b: int = DEFAULT_B, w: int = DEFAULT_W) -> None:
        self.b, self.w = b, w
        self.bytes_sent = 0
        self.bytes_full = 0  # what sending every version in full would have cost

    def push(self, index, url: str, epoch: int, terms: list[str], remote: bool = False) -> int:
        """Send version (url, epoch) of ``terms`` to ``index`` (an IndexUpdater, or its actor handle
        with ``remote=True``); returns the number of fragments that had to travel."""
        frags = fragments(terms, self.b, self.w)
        hashes = [fragment_hash(f) for f in frags]
        bits = np.unpackbits(np.frombuffer(_call(index, remote, "missing", hashes), dtype=np.uint8))[: len(hashes)]
        new = {h: f for h, f, m in zip(hashes, frags, bits, strict=True) if m}
        self.bytes_sent += 8 * len(hashes) + sum(len(" ".join(f)) + 8 for f in new.values())
        self.bytes_full += len(" ".join(terms))
        _call(index, remote, "add_version", url, epoch, hashes, new)
        return len(new)


def _call(index, remote: bool, method: str, *args):
    if not remote:
        return getattr(index, method)(*args)
    import ray

    return ray.get(getattr(index, method).remote(*args))


def actor_class():
    """The Ray actor shell of :class:`IndexUpdater` (built lazily so importing this module does not
    import Ray): ``actor_class().remote(b, w)``."""
    import ray

    return ray.remote(num_cpus=0)(IndexUpdater)
