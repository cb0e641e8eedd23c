"""robots.txt per origin, fetched as the workbench schedules it (RFC 9309).

A :class:`RobotsFetch` keeps the rules of the origins a fetch actor visited lately (all rules are in
Redis, ``P robots``: one visited long ago is read back from there, so the actor's memory does not
grow with every host of a broad crawl) and makes the requests of one origin's robots.txt fetch:
redirects followed up to five hops, to the same server or another (borrowed from the workbench
when due), transient failures retried with back-off, unreachable files ruled as RFC 9309 says.
The fetch loop schedules; this module knows what a robots.txt fetch is.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raycrawl.actors.frontier.workbench import ROBOTS, Release, Workbench, inflight_key
from raycrawl.exchange import LOCAL, PROXY, REDIRECT_STATUSES, FetchResult
from raycrawl.policies.politeness import Politeness, response_end
from raycrawl.policies.robots import MAX_HOPS, PARSE_LIMIT, PARSED, PROXY_FAILED, RobotsRules
from raycrawl.servers import name_of, server_of
from raycrawl.settings import Settings
from raycrawl.urls import split_host

if TYPE_CHECKING:
    from raycrawl.actors.fetch.dns import Resolver
    from raycrawl.actors.fetch.fetcher import Fetcher

CACHE_SIZE = 8192  # parsed robots.txt rules kept in a fetch actor (about 5 KB each)


class LruDict(OrderedDict):
    """A dict of at most ``size`` entries: reading or writing one makes it the newest; the oldest
    goes first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key, default=None):  # noqa: ANN001, ANN201 - dict's signature
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key, value) -> None:  # noqa: ANN001
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)


@dataclass(frozen=True)
class RobotsHop:
    """Where a robots.txt fetch stands, as its visit-state marker carries it: ``hops`` redirects
    followed so far, ``last`` the end of our last request to the asking server (0: none yet),
    ``target`` the next request — a path on the asked origin, or an absolute URL elsewhere.

    Encoded as ``ROBOTS`` alone (the first request, ``/robots.txt``) or ``ROBOTS hops last target``;
    markers of crawls from before the last-contact field (``ROBOTS hops target``) still decode."""

    hops: int = 0
    last: float = 0.0
    target: str = "/robots.txt"

    @classmethod
    def decode(cls, marker: str) -> RobotsHop:
        if marker == ROBOTS:
            return cls()
        parts = marker.split(" ", 3)
        if len(parts) == 3:
            return cls(int(parts[1]), 0.0, parts[2])
        return cls(int(parts[1]), float(parts[2]), parts[3])

    def encode(self) -> str:
        if self == RobotsHop():
            return ROBOTS
        return f"{ROBOTS} {self.hops} {self.last:.6f} {self.target}"


@dataclass
class RobotsStep:
    """What one request of a robots.txt fetch decided, for the fetch loop to carry out: the
    exchange to record (None: nothing to record yet), the servers to hand back to the workbench,
    and ``local``: the request failed on our side (nothing reached the server: the loop puts the
    entry back untouched, as it does a page's)."""

    fr: FetchResult | None = None
    releases: list[Release] = field(default_factory=list)
    local: FetchResult | None = None


def _back(server: tuple[str, str], end: float | None = None, crawl_delay: float | None = None,
          putback: tuple[str, ...] = (), not_before: float | None = None) -> Release:
    """The one way a robots.txt request hands a server back (``end`` None: nothing was sent to it)."""
    return Release(*server, end=end, crawl_delay=crawl_delay, putback=putback, not_before=not_before)


class RobotsFetch:
    """robots.txt rules and fetches for one fetch loop; ``counters``: the loop's request counters."""

    def __init__(self, settings: Settings, politeness: Politeness, workbench: Workbench, counters: dict[str, int],
                 off_loop, waits: Callable[[FetchResult], bool], cache_size: int = CACHE_SIZE) -> None:  # noqa: ANN001
        """``off_loop``: runs a Redis write off the event loop (``await off_loop(fn, *args)``: the
        fetch loop's Redis thread); ``waits``: whether a failed request waits to be tried again,
        nothing having reached its host (FetchLoop._waits)."""
        self.s, self.politeness, self.wb = settings, politeness, workbench
        self.off_loop, self.waits = off_loop, waits
        self.counters = counters
        self.cache: LruDict[str, RobotsRules] = LruDict(cache_size)
        self.attempts: dict[str, int] = {}

    def rules(self, origin: str) -> RobotsRules | None:
        """The robots.txt rules of ``origin`` known to this actor, or that another fetch actor (or
        the crawl before a resume) stored in Redis."""
        rules = self.cache.get(origin)
        if rules is None:
            raw = self.wb.frontier.robots_rules(origin)
            if raw is None:
                return None
            rules = self.cache[origin] = RobotsRules.from_dict(json.loads(raw))
        return rules

    async def visit(self, fetcher: Fetcher, resolver: Resolver, host: str, ip: str, entry: str, origin: str,
                    marker: str, keep_alive: bool) -> RobotsStep:
        """One request of the robots.txt fetch of ``origin`` on server ``host`` — the crawl's only
        robots.txt code path — and what it decided.

        ``marker`` is a :class:`RobotsHop`'s encoding: its redirects are followed (RFC 9309
        §2.3.1.2: up to five, also to other authorities); ``target`` is a path on ``origin`` or an
        absolute URL elsewhere; ``last`` is when our last request to ``host`` ended.
        ``entry`` is the marker behind its origin's tag (the visit-state entry). Every request is
        scheduled like any other: a hop on ``host`` — on this origin or another scheme or port of
        the same server — waits for it again (and, its Crawl-delay being unknown until the file is
        read, the largest one we would honour); a hop to another server borrows that server from the
        workbench only when it and its IP are due (:meth:`Workbench.borrow`), else ``host`` waits
        and tries again. Transient failures (no response, 429, 5xx) are retried with back-off,
        ``max_retries`` times, before the origin is ruled unreachable (everything disallowed,
        re-checked after ``UNREACHABLE_TTL``). The rules found apply to ``origin``, the one asked.
        ``keep_alive``: keep the connection after a request to ``host`` (the loop's rule)."""
        hop = RobotsHop.decode(marker)
        hops, last, target = hop.hops, hop.last, hop.target
        key, tag = inflight_key(host, entry), entry[:len(entry) - len(marker)]
        limit = max(self.s.max_body, PARSE_LIMIT)
        asked = (host, ip)
        borrowed: tuple[str, str] | None = None
        other = host if target.startswith("/") else server_of(target)
        if other == host:
            # The page that waited for robots.txt follows (its Crawl-delay still unknown: the default).
            url = origin + target if target.startswith("/") else target
            fr = await fetcher.fetch(url, ip, max_body=limit, keep_alive=keep_alive)
        else:
            other_ip = await resolver.resolve(name_of(other))
            now = time.time()
            if other_ip is not None and not fetcher.policy.allows(other_ip):
                fr = FetchResult(url=target, ip=other_ip, started=now, ended=now, error="forbidden-network")
            elif other_ip is None:
                fr = FetchResult(url=target, ip="", started=now, ended=now, error="dns")
            else:
                wait = await self.off_loop(self.wb.borrow, other, other_ip, ip, now)
                if wait is not None:  # not due yet: nothing sent, try again then
                    return RobotsStep(releases=[_back(asked, putback=(entry,), not_before=wait)])
                borrowed = (other, other_ip)
                fr = await fetcher.fetch(target, other_ip, max_body=limit, keep_alive=False)
        if fr.error in (LOCAL, PROXY) and self.waits(fr):  # nothing reached it: a borrowed server goes back
            return RobotsStep(releases=[_back(borrowed)] if borrowed else [], local=fr)
        self.counters["robots_requests"] += fr.error not in ("dns", "forbidden-network")
        if fr.error == "too-large":
            fr.error = None  # RFC 9309 §2.5: the first 500 KiB are parsed, the rest ignored
        status = 0 if fr.error is not None and fr.error != "bomb" else fr.status
        if fr.error == PROXY:
            status = PROXY_FAILED
        end = response_end(fr) if fr.error != "dns" else fr.ended
        # The server asked was contacted only if the request went to it; its IP may still have been.
        host_end = end if borrowed is None else None
        lender_delay = None if borrowed is None else self.known_delay(split_host(target)[0])
        attempt = self.attempts.get(key, 0) + 1
        retry = (status in (0, PROXY_FAILED) and fr.error not in ("forbidden-network", "bomb")) or fr.transient
        if retry and attempt <= self.s.max_retries:
            self.attempts[key] = attempt
            self.counters["retries"] += 1
            mine = _back(asked, host_end, putback=(entry,), not_before=self.politeness.retry_next(end, attempt, None))
        elif status in REDIRECT_STATUSES and fr.redirect and hops < MAX_HOPS:
            self.attempts.pop(key, None)
            to_origin, to_path = split_host(fr.redirect)
            # The end of our last request to ``host`` travels with the hops: its Crawl-delay, read
            # from another server, must count from there (not from that server's answer).
            contact = host_end if host_end is not None else last
            nxt = tag + RobotsHop(hops + 1, contact, to_path if to_origin == origin else fr.redirect).encode()
            # A second request to the server just asked waits its largest possible Crawl-delay
            # (unknown until a file is read); another server's own next-fetch time governs it.
            again = server_of(fr.redirect) == (borrowed[0] if borrowed else host)
            if again and borrowed:
                lender_delay = self.politeness.max_crawl_delay
            mine = _back(asked, host_end, putback=(nxt,),
                         not_before=end + self.politeness.max_crawl_delay if again and not borrowed else None)
        else:
            self.attempts.pop(key, None)
            if status in REDIRECT_STATUSES:
                status = 404  # too many redirects, or an unusable Location: "unavailable" (§2.3.1.2)
            rules = RobotsRules.from_response(status, fr.body, self.s.user_agent, fr.ended or time.time(),
                                              self.s.robots_ttl)
            self.cache[origin] = rules
            await self.off_loop(self.wb.frontier.store_robots, origin, json.dumps(rules.to_dict()))
            not_before = self.politeness.host_next(last, rules.crawl_delay) if host_end is None and last else None
            mine = _back(asked, host_end, crawl_delay=rules.crawl_delay, not_before=not_before)
        # (an outcome without an exchange — dns, forbidden-network — still commits the in-flight marker)
        return RobotsStep(fr, ([_back(borrowed, end, lender_delay)] if borrowed else []) + [mine])

    def known_delay(self, origin: str) -> float:
        """The Crawl-delay a borrowed server must be given after our request to ``origin`` on it: its
        own if that origin's robots.txt was read, else the largest one we would honour (the hop may
        be our first request there, before its robots.txt: the next one, perhaps that very file,
        waits as if it said so)."""
        rules = self.rules(origin)
        if rules is None or rules.mode != PARSED:
            return self.politeness.max_crawl_delay if rules is None else 0.0
        return rules.crawl_delay or 0.0
