"""The workbench (BUbiNG §3.5): visit states grouped into workbench entries, in Redis.

A :class:`VisitState` is a server's FIFO of URLs plus its next-fetch time — a server being a host
name whatever the scheme and port (:mod:`raycrawl.servers`: ``http://a.test/`` and
``https://a.test/`` share one schedule, each URL's entry naming its origin); a
:class:`WorkbenchEntry` groups the visit states of one IP address and has the IP's next-fetch
time. A host is *ready* when both times have passed. The workbench hands out ready hosts with
:meth:`Workbench.acquire` and takes them back with :meth:`Workbench.release`; between the two the
host and its IP are *busy*, so at most one request per host and per IP is ever in flight — the
acquire/release discipline makes politeness a property of the data structure, not of its callers.
All moves are Lua scripts (:mod:`storage.redis_frontier`), so several fetch actors, or agents,
share one workbench safely.

The first URL of every new visit state is :data:`ROBOTS`, a marker meaning "fetch robots.txt" of
the origin its tag names (robots.txt is per origin, RFC 9309): robots requests are scheduled, and
delayed, like any other request.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import redis

from raycrawl.policies.front_queues import split_level
from raycrawl.policies.politeness import Politeness
from raycrawl.servers import split_server, split_tag, url_of
from raycrawl.settings import Settings
from raycrawl.storage.redis_frontier import Group, RedisFrontier, Released

log = logging.getLogger(__name__)

ROBOTS = "!robots"
"""Path marker of a robots.txt fetch (real paths always start with "/"), behind its origin's tag."""


def robots_marker(entry: str) -> str:
    """The robots.txt marker for the origin of a visit-state ``entry`` (its tag, then ROBOTS)."""
    return split_tag(entry)[0] + ROBOTS


def is_robots(entry: str) -> bool:
    """Whether a visit-state entry is a robots.txt marker (of any origin): what follows its tag
    starts with ``!`` (a page's path starts with ``/``)."""
    return split_tag(entry)[1].startswith("!")


def inflight_key(host: str, entry: str) -> str:
    """The key of an acquired entry in ``P inflight`` (acquire.lua spells it the same way)."""
    return f"{host} {entry}"


def inflight_url(key: str) -> str:
    """The URL an in-flight key stands for (a robots.txt marker: its origin, then the marker)."""
    host, _, entry = key.partition(" ")
    return url_of(host, entry if is_robots(entry) else split_level(entry)[0])


@dataclass(frozen=True)
class VisitState:
    """A server as the workbench sees it (a read-only snapshot)."""

    host: str
    ip: str | None
    next_fetch: float
    queued: int
    busy: bool
    virtualized: int


@dataclass(frozen=True)
class WorkbenchEntry:
    """An IP address as the workbench sees it (a read-only snapshot)."""

    ip: str
    next_fetch: float
    busy: bool
    ready_hosts: list[tuple[str, float]]  # idle hosts with URLs and their next-fetch times


@dataclass(frozen=True)
class Release:
    """What happened to an acquired URL, for :meth:`Workbench.release`.

    ``end`` is the time the response ended (None: nothing was sent, the times stay as they were).
    ``putback`` paths go back to the FRONT of the visit state (a retry, or a URL that must wait for
    robots.txt); ``not_before`` delays the host further (retry back-off).
    """

    host: str
    ip: str
    end: float | None = None
    crawl_delay: float | None = None
    putback: tuple[str, ...] = ()
    not_before: float | None = None


class Workbench:
    """Visit states and workbench entries in Redis, with politeness applied on release."""

    def __init__(self, client: redis.Redis, prefix: str = Settings.redis_prefix, politeness: Politeness | None = None,
                 view: str = "agent0") -> None:
        self.frontier = RedisFrontier(client, prefix, view)
        self.politeness = politeness or Politeness()
        # The operator's host delays (``raycrawl ctl throttle``): server → delay, or None.
        self.delay_of: Callable[[str], float | None] = lambda server: None

    def add_urls(self, urls: list[str], ips: dict[str, str], new_hosts: set[str] = frozenset()) -> int:
        """Append canonical URLs to their servers' visit states (``ips``: server → IP). Servers in
        ``new_hosts`` get the robots.txt marker of their first URL's origin first."""
        groups: dict[str, list[str]] = defaultdict(list)
        for url in urls:
            host, entry = split_server(url)
            assert host in ips, host
            if host in new_hosts and host not in groups:
                groups[host].append(robots_marker(entry))
            groups[host].append(entry)
        return self.frontier.add([Group(h, ips[h], paths) for h, paths in groups.items()])

    def acquire(self, now: float, n: int) -> tuple[list[tuple[str, str, str]], float | None]:
        """Up to ``n`` ready (host, ip, path) of this agent's view, each host and IP now busy for
        every agent; and when the next one of the view becomes ready (None: nothing waiting)."""
        return self.frontier.acquire(now, n)

    def borrow(self, host: str, ip: str, held_ip: str, now: float) -> float | None:
        """Take ``host`` for one request it did not queue (a robots.txt redirect to another
        authority), as politely as :meth:`acquire` would: None when taken — give it back with a
        :class:`Release` like an acquired host — else the time to try again."""
        return self.frontier.borrow(host, ip, held_ip, now)

    def release(self, releases: list[Release]) -> list[int]:
        """Hand back acquired hosts: next fetch of host and IP from the END of the response.
        Returns each host's remaining queue length."""
        items = self._release_items(releases)
        return list(self.frontier.release(items)) if items else []

    def release_and_acquire(self, releases: list[Release], now: float,
                            n: int) -> tuple[list[tuple[str, str, str]], float | None]:
        """:meth:`release`, then :meth:`acquire`, in one Redis round trip: the fetch loop does both
        after every response, and round trips were its largest CPU cost (benchmarks/RESULTS.md,
        issue 16). The release runs first, so a host released here can be acquired again."""
        items = self._release_items(releases)
        return self.frontier.release_and_acquire(items, now, n)

    def _release_items(self, releases: list[Release]) -> list[Released]:
        items = []
        cdelays = []
        pol = self.politeness
        for rel in releases:
            if rel.end is None:
                hn, ipn = -1.0, -1.0
            else:
                hn = self.politeness.host_next(rel.end, rel.crawl_delay, self.delay_of(rel.host))
                ipn = self.politeness.ip_next(rel.end)
            if rel.crawl_delay:
                cdelays.append((rel.host, pol.effective_host_delay(rel.crawl_delay)))
            if rel.not_before is not None:
                hn = max(hn, rel.not_before)
            # A URL put back is re-queued and no longer in flight in the same script: never both or neither.
            items.append(Released(rel.host, rel.ip, hn, ipn, list(rel.putback or ())))
        if cdelays:  # for recover(): the delay a host busy at a crash must wait
            self.frontier.set_crawl_delays(dict(cdelays))
        return items

    def recover(self, now: float) -> int:
        """After a crash: in-flight URLs back in front of their visit states; every host and IP
        waits a full delay from ``now`` (a response may just have ended, and the AOF may have lost
        the last second of next-fetch times)."""
        pol = self.politeness
        return self.frontier.recover(now, pol.host_delay, pol.ip_delay)

    def recover_view(self, now: float) -> int:
        """This agent's fetchers died (none of its fetchers has anything in flight any more): their
        in-flight URLs go back to the front of their visit states, hosts and IPs wait a full delay."""
        pol = self.politeness
        return self.frontier.recover_view(now, pol.host_delay, pol.ip_delay)

    # --- snapshots ---------------------------------------------------------------------------------
    def visit_state(self, host: str) -> VisitState:
        f = self.frontier
        ip = f.r.hget(f.k.hostip, host)
        return VisitState(
            host=host,
            ip=ip.decode() if ip else None,
            next_fetch=float(f.r.hget(f.k.hnext, host) or 0),
            queued=f.r.llen(f.k.visit_state(host)),
            busy=bool(f.r.hexists(f.k.hbusy, host)),
            virtualized=int(f.r.hget(f.k.virt, host) or 0),
        )

    def entry(self, ip: str) -> WorkbenchEntry:
        f = self.frontier
        hosts = [(h.decode(), s) for h, s in f.r.zrange(f.k.entry(ip), 0, -1, withscores=True)]
        return WorkbenchEntry(ip=ip, next_fetch=float(f.r.hget(f.k.inext, ip) or 0),
                              busy=bool(f.r.sismember(f.k.ibusy, ip)), ready_hosts=hosts)
