r"""The workbench virtualizer (BUbiNG §3.6): per-host URL queues on disk.

A visit state keeps at most ``budget`` URLs in Redis; the rest of its FIFO waits in an on-disk
*virtual queue* ``VIRT_DIR/<xxh3(host)>.q`` (paths, one per line), so Redis memory grows with the
number of hosts, not of URLs. FIFO order is kept: once a host has URLs on disk, new URLs for it go
to disk too, and refills move the oldest ones back to the END of the visit state.

Durability: the bytes of a virtual queue that count are ``[voff, vend)`` as recorded in Redis
(hashes ``P voff``/``P vend``; ``P virt`` counts the URLs). A spill appends to the file and then
moves ``vend`` in the caller's Redis transaction (together with the sieve offset), so bytes written
by a spill that never committed are truncated away by the next spill. The caller syncs the
spills (:meth:`Virtualizer.sync`: one pass over the files they touched) before that transaction,
so Redis never names bytes a machine crash could take back. A refill reads lines at ``voff`` and
moves ``voff`` in the same transaction that puts them in the visit state.
"""

from __future__ import annotations

import logging
from pathlib import Path

import redis

from raycrawl import durable
from raycrawl.durable import sync_dir, sync_path
from raycrawl.policies.assignment import shard_of
from raycrawl.storage import shard_log
from raycrawl.storage.crawl_dir import virtual_queue
from raycrawl.storage.redis_frontier import Group, RedisFrontier

log = logging.getLogger(__name__)


class Virtualizer:
    def __init__(self, directory: str | Path, frontier: RedisFrontier, budget: int, log_spills: bool = False) -> None:
        """``log_spills`` (``agent_dir``): each spill is logged in its host's shard log too, in the
        transaction that commits its end (storage/shard_log.py), for an agent taking the shard over."""
        assert budget >= 2
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.f = frontier
        self.budget = budget
        self.spilled = 0
        self.refilled = 0
        self.log_spills = log_spills
        self._unsynced: dict[Path, bool] = {}  # spilled since the last sync → the file is new
        self._drained: list[Path] = []  # files of queues drained, deleted once Redis's side is durable

    def path(self, host: str) -> Path:
        return virtual_queue(self.dir, host)

    def virtualized(self, hosts: list[str]) -> list[int]:
        """URLs on disk for each host."""
        if not hosts:
            return []
        return [int(v or 0) for v in self.f.r.hmget(self.f.k.virt, hosts)]

    def ends(self, hosts: list[str]) -> list[int]:
        """Committed end of each host's virtual queue (bytes)."""
        if not hosts:
            return []
        return [int(v or 0) for v in self.f.r.hmget(self.f.k.vend, hosts)]

    def spill(self, host: str, paths: list[str], pipe: redis.client.Pipeline, end: int | None = None) -> None:
        """Append ``paths`` to the host's virtual queue; the Redis side happens when ``pipe`` (a
        transaction) executes. ``end``: the committed end if the caller already read it."""
        if end is None:
            end = int(self.f.r.hget(self.f.k.vend, host) or 0)
        path = self.path(host)
        if path not in self._unsynced:
            self._unsynced[path] = not path.exists()
        with open(path, "ab") as fh:
            fh.truncate(end)  # drop what an uncommitted spill left behind
            fh.seek(end)
            fh.write(("\n".join(paths) + "\n").encode())
            new_end = fh.tell()
        pipe.hset(self.f.k.vend, host, new_end)
        pipe.hincrby(self.f.k.virt, host, len(paths))
        if self.log_spills:
            pipe.rpush(self.f.shard_log_key(shard_of(host)), shard_log.spilled(host, end, paths))
        self.spilled += len(paths)

    def sync(self) -> None:
        """Make the spills since the last sync durable (their files, and the directory if one is new)."""
        spilled, self._unsynced = self._unsynced, {}
        durable.each(sync_path, spilled)
        if any(spilled.values()):
            sync_dir(self.dir)

    def refill(self, host: str, ip: str, n: int) -> int:
        """Move up to ``n`` of the host's oldest virtualized URLs to the end of its visit state.
        ``voff`` is WATCHed from its read to the transaction that moves it: if the connection to
        Redis breaks in between (a restart), the refill is dropped rather than possibly applied
        twice (the URLs queued twice); the next step refills again from the offset Redis holds."""
        with self.f.r.pipeline(transaction=True) as pipe:
            try:
                # (a view declared departed refills nothing: actors/frontier/distributor.py)
                pipe.watch(self.f.k.voff, self.f.fence_key())
                if self.f.is_fenced(client=pipe):
                    return 0
                off = int(pipe.hget(self.f.k.voff, host) or 0)
                end = int(pipe.hget(self.f.k.vend, host) or 0)
                paths: list[str] = []
                with open(self.path(host), "rb") as fh:
                    fh.seek(off)
                    while len(paths) < n and off < end:
                        line = fh.readline()
                        off += len(line)
                        paths.append(line.decode().rstrip("\n"))
                pipe.multi()
                self.f.add([Group(host, ip, paths)], pipe=pipe)
                if off >= end:  # queue drained: forget it
                    pipe.hdel(self.f.k.voff, host)
                    pipe.hdel(self.f.k.vend, host)
                    pipe.hdel(self.f.k.virt, host)
                else:
                    pipe.hset(self.f.k.voff, host, off)
                    pipe.hincrby(self.f.k.virt, host, -len(paths))
                pipe.execute()
            except redis.WatchError:
                log.info("virtualizer: refill of %s dropped (Redis restarted, or another agent refilled meanwhile)",
                         host)
                return 0
        if off >= end:
            self._drained.append(self.path(host))
        self.refilled += len(paths)
        return len(paths)

    def limbo(self) -> list[tuple[str, int]]:
        """Hosts with URLs on disk and fewer than half a budget in Redis: (host, queue length)."""
        r = self.f.r
        hosts = [h.decode() for h in r.hkeys(self.f.k.virt)]
        if not hosts:
            return []
        pipe = r.pipeline(transaction=False)
        for h in hosts:
            pipe.llen(self.f.k.visit_state(h))
        return [(h, n) for h, n in zip(hosts, pipe.execute(), strict=True) if n < self.budget // 2]

    def refill_limbo(self) -> int:
        """Refill every host in the limbo up to its budget. Returns URLs moved."""
        moved = 0
        limbo = self.limbo()
        ips = self.f.host_ips([h for h, _ in limbo])
        for (host, qlen), ip in zip(limbo, ips, strict=True):
            assert ip is not None, f"virtualized host {host} has no IP"
            moved += self.refill(host, ip, self.budget - qlen)
        self._delete_drained()
        return moved

    def _delete_drained(self) -> None:
        """Delete the files of the queues the refills drained, once Redis's forgetting them is on
        disk: a machine crash may take Redis's last second of writes (appendfsync everysec), and a
        Redis that still names a queue whose file is gone has lost its URLs. (Before the next spill,
        which may make the file again.)"""
        if not self._drained:
            return
        self.f.wait_durable()
        for path in self._drained:
            path.unlink(missing_ok=True)
        self._drained = []
