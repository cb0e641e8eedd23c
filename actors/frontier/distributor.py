"""The distributor (BUbiNG §3.7): moves URLs out of the sieve and the virtual queues into the workbench.

Two forces, as in BUbiNG. The *front* (hosts with URLs in the workbench) must be large enough that
fetchers never wait: each time the fetchers wait for politeness while the front is at least the
*required front size*, the latter grows (:meth:`Distributor.fetchers_waited`). And the visit should
stay close to breadth-first: URLs already queued (in Redis or in virtual queues) come before the
sieve's. So each :meth:`Distributor.step` first refills the *limbo* (hosts with URLs on disk but few
in Redis) and only then, if the front is still below the required size, reads the sieve — where new
hosts are found. A URL from the sieve goes to its visit state, or to the host's virtual queue once the
visit state holds its budget (or already has URLs on disk, to keep FIFO order).

New hosts are resolved first (the ``resolve`` callable: the DNS resolvers); a host without an address,
or whose address the network policy forbids, is not queued: its URLs come back as failures for the
caller to record. Hosts get at most ``max_urls_per_host`` URLs, ever.

A focused crawl (:mod:`policies.focus`) reads the sieve's priority levels — Mercator's front
queues, each URL's level drawn with a randomised bias — and keeps Mercator's fixed number of back
queues: its front stays at the required size (no growth while fetchers wait), and a step takes
URLs from the sieve only up to the one that would bring more new hosts than the front lacks, so a
host joins the front when there is room, in the order the front queues give. A URL's level goes
with its path into the visit state (:func:`policies.front_queues.with_level`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from raycrawl.actors.frontier.virtualizer import Virtualizer
from raycrawl.actors.frontier.workbench import Workbench, robots_marker
from raycrawl.policies.assignment import SHARDS
from raycrawl.policies.front_queues import DEFAULT_BIAS, queue_id, with_level
from raycrawl.servers import name_of, split_server
from raycrawl.settings import Settings
from raycrawl.storage.redis_frontier import Group

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    taken: int = 0  # URLs read from the sieve
    queued: int = 0  # put in visit states
    spilled: int = 0  # put in virtual queues
    refilled: int = 0  # moved from virtual queues to visit states
    new_hosts: int = 0
    over_host_limit: int = 0  # dropped by max_urls_per_host
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, error kind) not queued

    @property
    def moved(self) -> bool:
        """The step took URLs from the sieve or the virtual queues."""
        return bool(self.taken or self.refilled)


class Distributor:
    def __init__(self, workbench: Workbench, virtualizer: Virtualizer, *, front_size: int = Settings.front_size,
                 max_front_size: int = Settings.max_front_size,
                 max_urls_per_host: int = Settings.max_urls_per_host, batch: int = 1000,
                 allows: Callable[[str], bool] = lambda ip: True, levels: int = 1, bias: float = DEFAULT_BIAS,
                 focused: bool = False) -> None:
        """``levels``/``bias``: the sieve's front queues and the selector's bias; ``focused``: keep
        the front at the required size (a focused crawl, see the module docstring)."""
        self.wb = workbench
        self.f = workbench.frontier
        self.virt = virtualizer
        self.required_front = front_size
        self.max_front_size = max_front_size
        self.max_urls_per_host = max_urls_per_host
        self.batch = batch
        self.allows = allows
        self.shards: list[int] = list(range(SHARDS))  # the shards whose sieve output this distributor reads
        self.levels, self.bias, self.focused = levels, bias, focused
        self.fenced = False  # (said once a fence)

    @property
    def queues(self) -> list[int]:
        """Ids of the front queues this distributor reads (every level of every shard it reads)."""
        return [queue_id(s, lvl) for lvl in range(self.levels) for s in self.shards]

    def fetchers_waited(self) -> None:
        """Fetchers had free slots and nothing was ready: enlarge the required front if the front
        already reached it (otherwise the sieve simply has not delivered enough hosts yet). A
        focused crawl keeps its front (Mercator's B back queues)."""
        if self.focused:
            return
        if self.f.front_size() >= self.required_front and self.required_front < self.max_front_size:
            self.required_front = min(self.max_front_size, self.required_front + max(1, self.required_front // 10))
            log.debug("required front size now %d", self.required_front)

    def step(self, read_sieve: Callable[..., tuple[list[str], list[int], list[int], list[int]]],
             resolve: Callable[[list[str]], dict[str, str | None]]) -> StepResult:
        """One round: refill the limbo, then (front permitting) one batch from the sieve.
        ``read_sieve(offsets, n, levels, bias)`` is :meth:`actors.frontier.sieve_shards.SieveShards.read_front`
        over the queues in :attr:`queues`; ``resolve(names)`` maps host names to IPv4 addresses or None.

        The shards' offsets are WATCHed from before the read to the transaction that queues the
        URLs and moves the offsets: if the connection to Redis breaks in between (a Redis restart,
        and the client retries), the step is dropped rather than possibly applied twice."""
        res = StepResult(refilled=self.virt.refill_limbo())
        front = self.f.front_size()
        if front >= self.required_front:
            return res
        with self.f.r.pipeline(transaction=True) as pipe:
            try:
                return self._from_sieve(pipe, read_sieve, resolve, res, self.required_front - front)
            except redis.WatchError:
                if not self._is_fenced(self.f.r):
                    log.warning("distributor: Redis connection lost during a step; the step is dropped")
                return StepResult(refilled=res.refilled)

    def _from_sieve(self, pipe, read_sieve, resolve, res: StepResult, room: int) -> StepResult:
        queues = self.queues
        # A view declared departed (fence.lua) queues nothing: its shards' successors distribute
        # them from their own offsets, which this step would move. Watched with the offsets, so a
        # fence set before the transaction runs drops the step too.
        pipe.watch(self.f.fence_key(), *[self.f.k.sieve_offset(q) for q in queues])
        if self._is_fenced(pipe):
            return res
        offsets = self.f.sieve_offsets(queues, client=pipe)
        urls, levels, qids, ends = read_sieve(offsets, self.batch, self.levels, self.bias)
        if not urls:
            return res
        if self.focused:
            take = self._front_cut(urls, room)
            urls, levels, qids, ends = urls[:take], levels[:take], qids[:take], ends[:take]
        new_offsets = dict(zip(qids, ends, strict=True))  # each queue's last URL taken
        res.taken = len(urls)
        by_host: dict[str, list[tuple[str, str, int]]] = defaultdict(list)  # server → (url, entry, level)
        for url, lvl in zip(urls, levels, strict=True):
            host, entry = split_server(url)
            by_host[host].append((url, entry, lvl))
        hosts = list(by_host)
        known = dict(zip(hosts, self.f.host_ips(hosts), strict=True))
        new = [h for h in hosts if known[h] is None]
        names = sorted({name_of(h) for h in new})
        addresses = resolve(names) if names else {}
        counts = dict(zip(hosts, self.f.host_counts(hosts), strict=True))
        virtualized = dict(zip(hosts, self.virt.virtualized(hosts), strict=True))
        lengths = dict(zip(hosts, self.f.queue_lengths(hosts), strict=True))
        ends = dict(zip(hosts, self.virt.ends(hosts), strict=True))
        ips: dict[str, str] = {}
        groups: list[Group] = []
        pipe.multi()
        for host, host_urls in by_host.items():
            ip = known[host] or addresses.get(name_of(host))
            if ip is None or not self.allows(ip):
                kind = "dns" if ip is None else "forbidden-network"
                res.failed += [(u, kind) for u, _, _ in host_urls]
                continue
            allowed = max(0, self.max_urls_per_host - counts[host])
            if len(host_urls) > allowed:
                res.over_host_limit += len(host_urls) - allowed
                host_urls = host_urls[:allowed]
            if not host_urls:
                continue
            ips[host] = ip
            paths = [with_level(e, lvl) for _, e, lvl in host_urls]
            pipe.hincrby(self.f.k.hcount, host, len(paths))
            if known[host] is None:  # robots.txt of its first URL's origin (any other: when needed)
                paths.insert(0, robots_marker(host_urls[0][1]))
                res.new_hosts += 1
            in_redis = 0 if virtualized[host] else max(0, self.virt.budget - lengths[host])
            keep, spill = paths[:in_redis], paths[in_redis:]
            if spill:
                self.virt.spill(host, spill, pipe, end=ends[host])
                res.spilled += len(spill)
            groups.append(Group(host, ip, keep))
            res.queued += len(keep)
        # Even a batch that queued nothing moves the offsets: those URLs were dealt with.
        self.f.add(groups, pipe=pipe)
        self.f.note_failing(res.failed, pipe=pipe)  # in flight with the offsets' move: never lost between
        pipe.mset({self.f.k.sieve_offset(q): off for q, off in new_offsets.items()})
        self.virt.sync()  # the spills' bytes on disk before Redis names their ends
        pipe.execute()
        return res

    def _is_fenced(self, client) -> bool:  # noqa: ANN001 - a Redis client or a watching pipeline
        fenced = self.f.is_fenced(client=client)
        if fenced and not self.fenced:
            log.warning("distributor: this agent was declared departed; it distributes nothing more")
        self.fenced = fenced
        return fenced

    def _front_cut(self, urls: list[str], room: int) -> int:
        """How many of ``urls`` to take so that at most ``room`` hosts not in the front join it."""
        servers = [split_server(u)[0] for u in urls]
        hosts = list(dict.fromkeys(servers))
        active = dict(zip(hosts, self.f.in_front(hosts), strict=True))
        joining: set[str] = set()
        for i, host in enumerate(servers):
            if not active[host] and host not in joining:
                if len(joining) == room:
                    return i
                joining.add(host)
        return len(urls)
