"""A host shard's log in Redis: what changed in its sieve and virtual queues since its last
checkpoint in the object store, so that another agent can rebuild the shard exactly when its owner's
node is lost (``agent_dir``: docs/crawling.md, "Several agents without a shared OUT").

A shard's state on its owner's disk is a deterministic function of what was done to it: the URLs
enqueued into its sieve (after the sieve's cache of recent URLs), the sieve's flushes, and the
paths spilled to its hosts' virtual queues at the ends Redis committed for them. Each of those is
appended to the shard's list in Redis (``P slog:<shard>``) before the action is acknowledged — an
enqueue before its call returns, a flush before any offset into its queues leaves the sieve, a
spill in the very transaction that commits its end — so the log and a checkpoint of the shard's
files (storage/shard_handoff.py) give back the owner's last acknowledged state: the same
fingerprints, the same queue bytes at the same offsets (which Redis's distributed offsets point
into), the same virtual queues. A checkpoint trims the entries it holds; the log is bounded by the
checkpoint interval × the crawl's rate, never by pages.

Entries (bytes):

========================== ===================================================================
``E`` + lines              URLs enqueued, one per line, ``url`` or ``url<TAB>level``
``F``                      the sieve's batch merged (:meth:`actors.frontier.sieve.Sieve.flush`)
``V`` host TAB end + lines paths appended to the host's virtual queue at byte ``end``
========================== ===================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

FLUSH = b"F"


def enqueued(urls: list[str], levels: list[int]) -> bytes:
    """The entry of URLs enqueued into a shard's sieve, with their levels."""
    return b"E" + "\n".join(f"{u}\t{lvl}" if lvl else u for u, lvl in zip(urls, levels, strict=True)).encode()


def spilled(host: str, end: int, paths: list[str]) -> bytes:
    """The entry of ``paths`` appended to ``host``'s virtual queue at byte ``end``."""
    return f"V{host}\t{end}\n".encode() + "".join(p + "\n" for p in paths).encode()


@dataclass(frozen=True)
class Enqueued:
    urls: list[str]
    levels: list[int]


@dataclass(frozen=True)
class Flushed:
    pass


@dataclass(frozen=True)
class Spilled:
    host: str
    end: int
    data: bytes  # the lines as written


def parse(entries: Iterable[bytes]) -> Iterator[Enqueued | Flushed | Spilled]:
    """The entries of a shard's log, in order. An entry of another kind is a bug: ValueError."""
    for entry in entries:
        kind, body = entry[:1], entry[1:]
        if kind == b"E":
            urls, levels = [], []
            for line in body.decode().split("\n") if body else ():
                url, _, lvl = line.partition("\t")
                urls.append(url)
                levels.append(int(lvl) if lvl else 0)
            yield Enqueued(urls, levels)
        elif kind == FLUSH:
            yield Flushed()
        elif kind == b"V":
            head, _, data = body.partition(b"\n")
            host, _, end = head.decode().partition("\t")
            yield Spilled(host, int(end), data)
        else:
            raise ValueError(f"not a shard log entry: {entry[:40]!r}")
