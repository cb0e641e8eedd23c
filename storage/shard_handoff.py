"""Host shards moving between agents through the object store, so a cluster needs no shared
filesystem (``agent_dir`` with ``out_store``: docs/crawling.md, "Several agents without a shared OUT").

A shard's on-disk state is its sieve directory (``sieve/NN``: fingerprints, output queues, pending
log, duplicate store) and the virtual queues of its hosts (``virtualizer/<xxh3(host)>.q``). The
agent that owns a shard keeps that state in its own directory; when the shard moves (a join, the
end of a run), the giver *puts it away* — uploads every file under ``sieve/NN/…`` and
``virtualizer/NN/…`` in the store, confirms each key by the store's listing at the local size,
deletes keys of the shard the upload did not write (an older state), marks the shard as in the
store, and only then deletes its local copy — and the taker *brings* it: downloads the shard's
keys into its own directory and marks the shard as its own.

Where each shard's latest state is lives in Redis, hash ``P shome`` (shard → ``store FILES BYTES``,
what the put-away confirmed, or the holder ``agent@host:dir``; absent: a shard with no state yet).
A store that no longer holds those files (an emptied bucket) is an error, never an empty shard. A
shard held by someone else (an agent that died with it, its node's disk out of reach) is never
taken from an older copy: that would forget URLs seen since and read its queues from offsets they
do not reach. Taking it is a one-line error instead; the holder's directory brought back
(``--resume`` on the same machines) has it.
"""

from __future__ import annotations

import logging
import shutil
import socket
from collections.abc import Iterable
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.policies.assignment import shard_of
from raycrawl.storage.crawl_dir import layout, virtual_queue
from raycrawl.storage.out_store import OutStore, StoreError
from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)

IN_STORE = "store"


def _in_store(home: bytes | None) -> tuple[int, int] | None:
    """(files, bytes) of a shard put away in the store, per its ``P shome`` value."""
    parts = (home or b"").decode().split()
    return (int(parts[1]), int(parts[2])) if len(parts) == 3 and parts[0] == IN_STORE else None


def holder_name(agent: str, out: Path) -> str:
    """Who holds a shard: the agent, its machine and its directory (a resumed agent of the same
    name on another machine does not have the files)."""
    return f"{agent}@{socket.gethostname()}:{out}"


class ShardHandoff:
    """One agent's side of the moves: ``out`` is its own directory."""

    def __init__(self, store: OutStore, frontier: RedisFrontier, out: Path, holder: str) -> None:
        self.store, self.f, self.out, self.holder = store, frontier, Path(out), holder
        self.key = frontier.key("shome")

    def _local_sieve(self, shard: int) -> Path:
        return layout(self.out).sieve / f"{shard:02d}"

    def _virtual_queues(self, shards: set[int]) -> dict[int, list[Path]]:
        """The local virtual-queue files of the hosts of ``shards`` that have one in Redis."""
        out: dict[int, list[Path]] = {s: [] for s in shards}
        for host, _ in self.f.virtual_queue_ends():
            s = shard_of(host)
            if s in shards:
                out[s].append(virtual_queue(layout(self.out).virtualizer, host))
        return out

    def bring(self, shards: Iterable[int]) -> int:
        """Make this agent's directory hold the latest state of ``shards``; files downloaded."""
        shards = sorted(shards)
        if not shards:
            return 0
        homes = dict(zip(shards, self.f.r.hmget(self.key, [str(s) for s in shards]), strict=True))
        foreign = {s: h.decode() for s, h in homes.items()
                   if h is not None and _in_store(h) is None and h.decode() != self.holder}
        mine_lost = [s for s, h in homes.items() if h is not None and h.decode() == self.holder
                     and not self._local_sieve(s).is_dir()]
        if foreign or mine_lost:
            where = sorted(set(foreign.values())) or [self.holder]
            raise UserError(f"shards {sorted(foreign) or mine_lost}: their latest sieve and virtual queues are on the "
                            f"disk of {', '.join(where)}, not in the object store; bring that directory back "
                            "(--resume on the same machines)")
        wanted = [s for s, h in homes.items() if h is None or _in_store(h) is not None]
        for s in wanted:  # a stale copy (an earlier ownership) goes first
            shutil.rmtree(self._local_sieve(s), ignore_errors=True)
        for paths in self._virtual_queues(set(wanted)).values():
            for p in paths:
                p.unlink(missing_ok=True)
        from_store = {s for s in wanted if homes[s] is not None}
        n = 0
        if from_store:
            keys = {k: size for part in ("sieve/", "virtualizer/") for k, size in self.store.listing(part).items()
                    if _shard_key(k)[0] in from_store}
            for s in sorted(from_store):
                held = [size for k, size in keys.items() if _shard_key(k)[0] == s]
                if (len(held), sum(held)) != _in_store(homes[s]):
                    files, size = _in_store(homes[s])
                    raise UserError(f"shard {s}: the object store {self.store.url} holds {len(held)} of its "
                                    f"{files} files ({sum(held)} of {size} bytes): its sieve is lost from the store")
            for key in keys:
                shard, name = _shard_key(key)
                target = self._local_sieve(shard) / name if key.startswith("sieve/") else layout(self.out).virtualizer / name
                self.store.get(key, target)
                n += 1
        for s in wanted:
            self._local_sieve(s).mkdir(parents=True, exist_ok=True)
        if wanted:
            self.f.r.hset(self.key, mapping={str(s): self.holder for s in wanted})
        log.info("shards %s brought from the store (%d files)", sorted(from_store), n)
        return n

    def put_away(self, shards: Iterable[int]) -> int:
        """Upload ``shards``' state (their sieves closed), confirm it, then delete the local copy;
        files uploaded. A store that refuses raises :class:`StoreError` with everything kept."""
        shards = set(shards)
        if not shards:
            return 0
        files: dict[str, Path] = {}
        for s in shards:
            root = self._local_sieve(s)
            for p in sorted(root.rglob("*")) if root.is_dir() else ():
                if p.is_file():
                    files[f"sieve/{s:02d}/{p.relative_to(root).as_posix()}"] = p
        for s, paths in self._virtual_queues(shards).items():
            files.update({f"virtualizer/{s:02d}/{p.name}": p for p in paths if p.is_file()})
        for key, path in files.items():
            self.store.put(path, key)
        held = {**self.store.listing("sieve/"), **self.store.listing("virtualizer/")}
        unconfirmed = [k for k, p in files.items() if held.get(k) != p.stat().st_size]
        if unconfirmed:
            raise StoreError(f"the object store {self.store.url} does not list {unconfirmed[0]} at its size "
                             f"after the upload; the shard stays in {self.out}")
        self.store.delete([k for k in held if k not in files and _shard_key(k)[0] in shards])
        totals = {s: [0, 0] for s in shards}
        for key, path in files.items():
            totals[_shard_key(key)[0]][0] += 1
            totals[_shard_key(key)[0]][1] += path.stat().st_size
        self.f.r.hset(self.key, mapping={str(s): f"{IN_STORE} {n} {size}" for s, (n, size) in totals.items()})
        for s in shards:
            shutil.rmtree(self._local_sieve(s), ignore_errors=True)
        for key, path in files.items():
            if key.startswith("virtualizer/"):
                path.unlink(missing_ok=True)
        log.info("shards %s put away in the store (%d files)", sorted(shards), len(files))
        return len(files)


def _shard_key(key: str) -> tuple[int, str]:
    """``sieve/NN/rest`` or ``virtualizer/NN/rest`` → (NN, rest)."""
    _, shard, rest = key.split("/", 2)
    return int(shard), rest
