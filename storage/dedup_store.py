"""Duplicate store: a crawl's duplicate indexes on disk, one SQLite file per shard.

Exact duplicates (the text digest → the first page that had it) and the crawl-time near-duplicate
index (LSH band keys → representative, representative → b-bit MinHash sketch and URL) grow with
every page, so they live beside the sieve, not in the shared Redis: BUbiNG's promise is that
central memory grows with hosts, not pages (seed 003). Every key falls in one of the crawl's
:data:`policies.assignment.SHARDS` shards (its low 64 bits modulo the count: digests and band keys
are hashes already, a representative's id is the hash of its URL), and a shard's file sits in the
shard's sieve directory (``OUT/sieve/<shard>/duplicates.sqlite``), so it moves between agents with
the shard (actors/cluster/membership.py) and is opened by one process at a time.

========== ====================================================================================
table      rows
========== ====================================================================================
``meta``   near-duplicate parameters (permutations, bands, bits, k, seed, hash scheme): a store
           built with others is refused, so sketches never mix
``digest`` 16-byte text digest → owner: JSON [first URL, its WARC-Date, its payload SHA-1]
``band``   64-bit band key (signed) → representative id (first writer wins)
``rep``    representative id (63-bit hash of its URL) → URL, sketch bytes
========== ====================================================================================

A write is in the file (its WAL) when the call returns, so it survives a kill -9 of the process;
the crawl commits a visit only after its claims and representatives are written. The file is not
synced (``synchronous=OFF``), like the sieve's own files: ``NORMAL``, which syncs the WAL at each
checkpoint, cost the crawl benchmark ~6 % of its pages/s, because the lookups are in the agent's
serial cycle. After a machine crash ``raycrawl check`` runs SQLite's ``quick_check`` on each file
and ``--repair`` starts a damaged one empty: a page seen before is then archived in full again,
never wrongly marked. Memory is SQLite's page cache, ``CACHE_KIB`` per open shard,
whatever the crawl's size; the rest is the operating system's file cache.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from raycrawl.errors import UserError

log = logging.getLogger(__name__)

FILE = "duplicates.sqlite"
CACHE_KIB = 512  # SQLite page cache per open shard (64 shards: 32 MiB at most per agent)
WAL_PAGES = 256  # pages of write-ahead log between checkpoints, per shard
PAGE_SIZE = 1024
_CHUNK = 900  # host parameters per IN (...) query, under every SQLite build's limit
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS digest (key BLOB PRIMARY KEY, owner TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS band (key INTEGER PRIMARY KEY, rep INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rep (id INTEGER PRIMARY KEY, url TEXT NOT NULL, sketch BLOB NOT NULL);
"""


class DedupStoreMismatch(UserError):
    """The stored near-duplicate index was built with other parameters (a crawl stops on it: it is
    not one of the routing errors a duplicate store's caller rides out, actors/visit/duplicates.py)."""


class DedupStoreError(OSError):
    """A shard's file is damaged or unreadable."""


_SQLITE_IOERR, _SQLITE_FULL = 10, 13  # primary result codes (the low byte of an extended one)


@contextlib.contextmanager
def disk_errors(path: Path) -> Iterator[None]:
    """SQLite's full-disk and I/O errors as the OSError they are, so that the crawl stops with its
    one line for a failing disk (core/stops.py) instead of a crash."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == _SQLITE_FULL:
            raise OSError(errno.ENOSPC, "No space left on device", str(path)) from exc
        if code == _SQLITE_IOERR:
            raise OSError(errno.EIO, f"I/O error ({exc})", str(path)) from exc
        raise


def _on_disk(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: DedupShard, *args: Any, **kwargs: Any) -> Any:
        with disk_errors(self.path):
            return method(self, *args, **kwargs)

    return wrapper


def signed64(key: int) -> int:
    """An unsigned 64-bit key as SQLite's signed INTEGER (the same 64 bits)."""
    return key - (1 << 64) if key >= 1 << 63 else key


def unsigned64(key: int) -> int:
    return key + (1 << 64) if key < 0 else key


class DedupShard:
    """One shard's file. Single writer (the shard's owner); every method is one transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with disk_errors(self.path):
                self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                # EXCLUSIVE before the first WAL access: no shared-memory file, so the WAL works on a
                # network filesystem too (shards move between nodes through OUT); one owner at a time.
                self.db.execute("PRAGMA locking_mode=EXCLUSIVE")
                # Small pages: a shard's empty file is 5 pages, and a crawl has 64 of them.
                self.db.execute(f"PRAGMA page_size={PAGE_SIZE}")
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=OFF")
                # A small WAL, checkpointed often and cut back after: 64 shards' logs stay ~16 MiB.
                self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
                self.db.execute(f"PRAGMA journal_size_limit={WAL_PAGES * PAGE_SIZE}")
                self.db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise DedupStoreError(f"duplicate store {self.path} is unreadable: {exc}") from None

    @_on_disk
    def check_meta(self, meta: dict[str, str]) -> None:
        """Store ``meta`` in a new file; refuse a file built with other parameters."""
        stored = dict(self.db.execute("SELECT k, v FROM meta").fetchall())
        if not stored:
            with self.db:
                self.db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        elif stored != meta:
            raise DedupStoreMismatch(f"near-duplicate index in {self.path} was built with {stored}, not {meta}")

    @_on_disk
    def claim(self, claims: Sequence[tuple[bytes, str]]) -> list[str]:
        """(digest, owner) pairs: the first claim of a digest owns it; returns each digest's owner,
        the caller's or an earlier one (a repeat within ``claims`` gets the first's)."""
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO digest VALUES (?, ?)", claims)
            found = dict(self._select_in("SELECT key, owner FROM digest WHERE key IN ({})", [d for d, _ in claims]))
        return [found[d] for d, _ in claims]

    @_on_disk
    def bands(self, keys: Sequence[int]) -> dict[int, int]:
        """Band key → representative id, for the keys stored (unsigned keys in and out)."""
        rows = self._select_in("SELECT key, rep FROM band WHERE key IN ({})", [signed64(k) for k in keys])
        return {unsigned64(k): rep for k, rep in rows}

    @_on_disk
    def reps(self, ids: Iterable[int]) -> dict[int, tuple[bytes, str]]:
        """Representative id → (sketch bytes, URL), for the ids stored."""
        rows = self._select_in("SELECT id, sketch, url FROM rep WHERE id IN ({})", list(ids))
        return {i: (bytes(sketch), url) for i, sketch, url in rows}

    @_on_disk
    def add(self, reps: Sequence[tuple[int, str, bytes]], bands: Sequence[tuple[int, int]]) -> None:
        """Representatives (id, URL, sketch) and band keys (key, id) of this shard; a band key
        already taken keeps its representative. Written in one transaction."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO rep VALUES (?, ?, ?)", reps)
            self.db.executemany("INSERT OR IGNORE INTO band VALUES (?, ?)", [(signed64(k), r) for k, r in bands])

    @_on_disk
    def counts(self) -> dict[str, int]:
        return {name: self.db.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # noqa: S608 - fixed names
                for name in ("digest", "band", "rep")}

    @_on_disk
    def quick_check(self) -> str:
        """SQLite's own consistency check of the file: "ok" or what is wrong."""
        return "; ".join(row[0] for row in self.db.execute("PRAGMA quick_check").fetchall())

    def _select_in(self, sql: str, values: list) -> list[tuple]:
        out: list[tuple] = []
        for i in range(0, len(values), _CHUNK):
            chunk = values[i:i + _CHUNK]
            out += self.db.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
        return out

    def close(self) -> None:
        self.db.close()


def shard_of_key(key: int | bytes, shards: int) -> int:
    """The shard of a digest (its first 8 bytes, little-endian) or of a 64-bit key."""
    if isinstance(key, bytes):
        key = int.from_bytes(key[:8], "little")
    return key % shards


def claims_by_shard(claims: Iterable[tuple[bytes, str]], shards: int) -> dict[int, list[tuple[bytes, str]]]:
    """(digest, owner) claims grouped by their digests' shards, in order."""
    out: dict[int, list[tuple[bytes, str]]] = {}
    for digest, owner in claims:
        out.setdefault(shard_of_key(digest, shards), []).append((digest, owner))
    return out


def adds_by_shard(reps: Iterable[tuple[int, str, bytes, Iterable[int]]], shards: int
                  ) -> dict[int, tuple[list[tuple[int, str, bytes]], list[tuple[int, int]]]]:
    """(id, URL, sketch bytes, band keys) representatives as :meth:`DedupShards.add` takes them:
    each representative in its id's shard, each band key in the key's."""
    out: dict[int, tuple[list, list]] = {}
    for rid, url, sketch, keys in reps:
        out.setdefault(shard_of_key(rid, shards), ([], []))[0].append((rid, url, sketch))
        for k in keys:
            out.setdefault(shard_of_key(k, shards), ([], []))[1].append((k, rid))
    return out


class DedupShards:
    """The duplicate stores of the shards one agent owns (:meth:`take`, :meth:`give`); requests come
    grouped by shard, and a shard not owned here is a routing bug (ValueError). A shard's file is
    opened at its first use, so a failing disk shows up in the call that needs it."""

    def __init__(self, root: str | Path, shards: Iterable[int] = ()) -> None:
        self.root = Path(root)
        self.owned: set[int] = set()
        self.open: dict[int, DedupShard] = {}
        self.meta: dict[str, str] | None = None
        self.take(shards)

    def path(self, shard: int) -> Path:
        return self.root / f"{shard:02d}" / FILE  # the shard's sieve directory (actors/frontier/sieve_shards.py)

    def take(self, shards: Iterable[int]) -> None:
        self.owned.update(shards)

    def give(self, shards: Iterable[int]) -> None:
        for s in shards:
            self.owned.discard(s)
            shard = self.open.pop(s, None)
            if shard is not None:
                shard.close()

    def set_meta(self, meta: dict[str, str]) -> None:
        """The near-duplicate parameters every owned shard must have (checked as each opens)."""
        self.meta = dict(meta)
        for shard in self.open.values():
            shard.check_meta(self.meta)

    def _shard(self, s: int) -> DedupShard:
        shard = self.open.get(s)
        if shard is None:
            if s not in self.owned:
                raise ValueError(f"duplicate store of shard {s} asked of an agent that does not own it")
            shard = DedupShard(self.path(s))
            if self.meta is not None:
                try:
                    shard.check_meta(self.meta)
                except DedupStoreMismatch:
                    shard.close()
                    raise
            self.open[s] = shard
        return shard

    def claim(self, by_shard: dict[int, list[tuple[bytes, str]]]) -> dict[int, list[str]]:
        return {s: self._shard(s).claim(claims) for s, claims in by_shard.items()}

    def bands(self, by_shard: dict[int, list[int]]) -> dict[int, int]:
        out: dict[int, int] = {}
        for s, keys in by_shard.items():
            out.update(self._shard(s).bands(keys))
        return out

    def reps(self, by_shard: dict[int, list[int]]) -> dict[int, tuple[bytes, str]]:
        out: dict[int, tuple[bytes, str]] = {}
        for s, ids in by_shard.items():
            out.update(self._shard(s).reps(ids))
        return out

    def add(self, by_shard: dict[int, tuple[list[tuple[int, str, bytes]], list[tuple[int, int]]]]) -> None:
        for s, (reps, bands) in by_shard.items():
            self._shard(s).add(reps, bands)

    def counts(self) -> dict[str, int]:
        total = {"digest": 0, "band": 0, "rep": 0}
        for shard in (self._shard(s) for s in sorted(self.owned)):
            for k, v in shard.counts().items():
                total[k] += v
        return total

    def close(self) -> None:
        self.give(list(self.open))
