"""An agent's lease: its fetch actors may start a request only while they know it runs.

Fencing, so that a departed agent can never fetch beside its successor (docs/crawling.md, "An agent
that dies"). Every fetch actor renews its agent's lease in Redis (``V lease``: Redis's clock + TTL,
lua/lease.lua) every :data:`INTERVAL` seconds, from a thread of its own, and believes in it only
until the moment it *sent* its last successful renewal + TTL, by its own monotonic clock: Redis
started the TTL later, so the actor's belief ends first, whatever its wall clock says and however
long its process was frozen (a stopped VM, a swap storm) — a frozen actor wakes up with the belief
already lapsed. The fetch loop acquires nothing, and the fetcher sends nothing, without it.

The driver buries a dead agent only once its lease has lapsed in Redis (lua/fence.lua); from then on
the view is fenced for good: renewals are refused, and acquire, borrow, release and commit by it
change nothing. Every request the agent started began before the lapse and ends within the longest
fetch (:func:`longest_fetch`) after it, so the in-flight hosts and IPs it leaves are due only after
that plus their delays. A lease that lapsed because Redis was away (nobody fenced it) is simply
renewed when Redis answers again.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from raycrawl.settings import Settings
from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)

INTERVAL = 2.0  # seconds between renewals
TTL = 10.0  # a lease outlives four missed renewals (a loaded machine, a slow Redis)


def longest_fetch(settings: Settings) -> float:
    """The longest a request can last once started: the fetcher's whole-exchange bound
    (actors/fetch/fetcher.py: connect + 3 × read timeout)."""
    return settings.connect_timeout + 3 * settings.read_timeout


class Lease:
    """One fetch actor's renewals of its agent's lease (a daemon thread; a client of its own,
    without the crawl client's minutes of patience: a renewal that cannot be sent is missed)."""

    def __init__(self, redis_url: str, prefix: str, view: str, ttl: float = TTL, interval: float = INTERVAL) -> None:
        client = redis.Redis.from_url(redis_url, socket_timeout=interval, socket_connect_timeout=interval)
        self.f = RedisFrontier(client, prefix, view=view, register=False)
        self.ttl, self.interval = ttl, interval
        self.until = 0.0  # time.monotonic() before which the lease surely runs
        self.fenced = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{view}", daemon=True)

    def start(self) -> Lease:
        """Renew now and every :data:`INTERVAL` s from then on (again: nothing more)."""
        if self._thread.ident is None:
            self.renew()
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)
        self.f.r.close()

    def valid(self, margin: float = 0.0) -> bool:
        """The lease surely runs for ``margin`` more seconds."""
        return time.monotonic() + margin < self.until

    def renew(self) -> bool:
        if self.fenced:
            return False
        sent = time.monotonic()
        try:
            ok = self.f.renew_lease(self.ttl)
        except redis.RedisError as exc:  # Redis restarting or gone: the lease runs out unless it returns
            log.debug("lease of %s not renewed: %s", self.f.view, exc)
            return False
        if not ok:
            self.fenced, self.until = True, 0.0
            log.warning("agent %s was declared departed: its fetchers start nothing more", self.f.view)
            return False
        self.until = max(self.until, sent + self.ttl)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval) and not self.fenced:
            self.renew()
