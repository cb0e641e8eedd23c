"""The cookies of the sites that keep them (core/site_sessions.py ``cookies``), one jar for the whole
crawl: every fetch actor of every agent sends what any of them was last set, as one browser would,
and a ``--resume`` goes on with them (they are in the crawl's Redis with its frontier).

Redis holds the Set-Cookie headers themselves, the latest per cookie (``P cookies``: setter host,
name, Domain and Path → the header, the URL that set it, when), and a version (``P cookies:v``)
that each set bumps. Before a request to such a site a fetcher reads the version, and on a change
rebuilds its aiohttp jar (RFC 6265: domain, path, expiry, Secure) from the headers in the order
they were set; after a response that set cookies it writes them before the visit ends, so the
fetcher that takes the host next (after its release) already sees them. A ``Max-Age`` is turned
into the ``Expires`` it means when it is written: a cookie replayed later does not live longer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis

if TYPE_CHECKING:  # (the fetch actor has them; the driver, which imports this module, need not)
    import aiohttp

log = logging.getLogger(__name__)


def _attributes(header: str) -> tuple[str, dict[str, str]]:
    """(the cookie's name, its attributes by lower-case name) of a Set-Cookie header."""
    first, *attrs = header.split(";")
    found = {}
    for attr in attrs:
        key, _, value = attr.partition("=")
        found[key.strip().lower()] = value.strip()
    return first.partition("=")[0].strip(), found


def absolute(header: str, at: float) -> str:
    """``header`` with a ``Max-Age`` (seconds from ``at``) written as the ``Expires`` it means."""
    parts = header.split(";")
    for i, attr in enumerate(parts[1:], 1):
        key, _, value = attr.partition("=")
        if key.strip().lower() == "max-age":
            try:
                seconds = int(value.strip())
            except ValueError:
                return header  # (the jar ignores a malformed one too)
            expires = formatdate(at + seconds if seconds > 0 else at - 86400, usegmt=True)  # (aiohttp ignores epoch 0)
            kept = [p for j, p in enumerate(parts) if j != i and p.partition("=")[0].strip().lower() != "expires"]
            return "; ".join(p.strip() for p in [*kept, f"Expires={expires}"])
    return header


class SharedCookies:
    def __init__(self, client: Any, prefix: str, jar: aiohttp.CookieJar,
                 off_loop: Callable[..., Awaitable[Any]]) -> None:
        """``off_loop(fn, *args)``: runs a Redis call off the event loop (the fetch loop's thread of
        Redis writes, in order: a set is written before the host's release)."""
        self.r, self.key, self.version_key = client, prefix + "cookies", prefix + "cookies:v"
        self.jar, self.off_loop = jar, off_loop
        self.seen = -1  # the version the jar was last built from

    def _read(self) -> tuple[int, dict]:
        pipe = self.r.pipeline(transaction=True)  # (the headers of exactly that version)
        pipe.get(self.version_key)
        pipe.hgetall(self.key)
        version, entries = pipe.execute()
        return int(version or 0), entries

    async def before(self) -> None:
        """Bring the jar up to what any fetcher was last set (as it is, when Redis does not answer:
        the fetcher never raises, and Redis gone stops the crawl by its own calls)."""
        try:
            version = int(await self.off_loop(self.r.get, self.version_key) or 0)
            if version == self.seen:
                return
            version, entries = await self.off_loop(self._read)
        except (redis.RedisError, OSError) as exc:
            log.warning("the crawl's cookies were not read (%s): this fetcher sends its own", exc)
            return
        import yarl

        self.jar.clear()
        for e in sorted((json.loads(v) for v in entries.values()), key=lambda e: e["at"]):
            self.jar.update_cookies_from_headers([e["set"]], yarl.URL(e["url"], encoded=True))
        self.seen = version

    async def after(self, headers: list[str], url: str) -> None:
        """Cookies ``url``'s response set (already in this fetcher's jar): for every fetcher."""
        if headers:
            try:
                await self.off_loop(self._write, headers, url, time.time())
            except (redis.RedisError, OSError) as exc:
                log.warning("cookies %s set were kept by this fetcher only (%s)", url, exc)

    def _write(self, headers: list[str], url: str, at: float) -> None:
        host = (urlsplit(url).hostname or "").lower()
        pipe = self.r.pipeline(transaction=True)
        for header in headers:
            name, attrs = _attributes(header)
            field = "\t".join((host, name, attrs.get("domain", "").lower(), attrs.get("path", "")))
            pipe.hset(self.key, field, json.dumps({"set": absolute(header, at), "url": url, "at": at}))
        pipe.incr(self.version_key)
        version = pipe.execute()[-1]
        if version == self.seen + 1:  # nobody else set one since this jar was built: it is current
            self.seen = version
