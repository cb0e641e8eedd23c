"""A crawl's heartbeat in Redis (``P alive:<name>``, expiring), kept by its driver — the process
that lives from its Redis to the end of the run, however many agents it runs; it begins beating
once a ``--resume`` has passed its checks (a refused one writes nothing). It is how ``raycrawl
status`` tells a running crawl from a stopped one: the state of a crawl whose Redis is external
outlives it, and its counters alone cannot say whether anyone still works on them.

A thread of its own: a paused crawl waits and still runs. A client of its own too, without the
crawl client's patience (core/redis_server.connect waits out a Redis restart for minutes): a beat
that cannot be sent is skipped, and a crawl stopping because Redis is gone is not held up taking
its beat back.
"""

from __future__ import annotations

import logging
import threading

import redis

from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)

INTERVAL = 2.0  # seconds between beats
TTL = 3 * INTERVAL  # a beat counts through two missed ones (a loaded machine, a slow Redis)


class Heartbeat:
    def __init__(self, redis_url: str, prefix: str, name: str) -> None:
        client = redis.Redis.from_url(redis_url, socket_timeout=INTERVAL, socket_connect_timeout=INTERVAL)
        self.f, self.name = RedisFrontier(client, prefix, register=False), name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{name}", daemon=True)

    def start(self) -> Heartbeat:
        self._beat()
        self._thread.start()
        return self

    def stop(self) -> None:
        """The run ends: no more beats, and the last one is taken back (if Redis answers)."""
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.f.stop_beating(self.name)
        except redis.RedisError as exc:
            log.debug("heartbeat of %s not taken back: %s", self.name, exc)
        finally:
            self.f.r.close()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self._beat()

    def _beat(self) -> None:
        try:
            self.f.beat(self.name)
        except redis.RedisError as exc:  # Redis restarting or gone: the crawl deals with it
            log.debug("heartbeat of %s missed: %s", self.name, exc)
