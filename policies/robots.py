"""robots.txt rules for one host, with RFC 9309 status semantics and an expiry.

* 2xx: the body is parsed by protego (only the first 512 KiB, RFC 9309 §2.5 lets us stop at 500 KiB);
* 3xx: the fetcher follows up to 5 redirects (``actors.fetcher.Fetcher.fetch_robots``); past
  that the file is "unavailable" (§2.3.1.2) and treated as 4xx;
* 4xx (except 429): unavailable — everything is allowed (§2.3.1.3);
* 429, 5xx, or no response at all (status 0: DNS, connect, timeout…): unreachable — everything
  is disallowed (§2.3.1.4) until the rules expire and robots.txt is fetched again.

Rules expire ``ttl`` seconds after they were fetched (the crawler re-fetches robots.txt then).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from protego import Protego

log = logging.getLogger(__name__)

PARSE_LIMIT = 512 * 1024
ALLOW_ALL = "allow"
DISALLOW_ALL = "disallow"
PARSED = "parsed"


def ua_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against: ``raycrawl/0.1 (+url)`` → ``raycrawl``."""
    token = user_agent.strip().split()[0] if user_agent.strip() else "*"
    return token.split("/")[0] or "*"


@dataclass
class RobotsRules:
    """What robots.txt says for one host and our user agent. Picklable; ``to_dict`` for Redis."""

    mode: str  # ALLOW_ALL | DISALLOW_ALL | PARSED
    user_agent: str
    expires: float
    status: int = 0
    body: str = ""
    _parser: Protego | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_response(cls, status: int, body: bytes, user_agent: str, now: float, ttl: float) -> RobotsRules:
        """Rules from the final response to ``/robots.txt`` (``status`` 0 = no response)."""
        expires = now + ttl
        if 200 <= status < 300:
            text = body[:PARSE_LIMIT].decode("utf-8", errors="replace").lstrip("\ufeff")
            return cls(PARSED, user_agent, expires, status, text)
        if 400 <= status < 500 and status != 429:
            return cls(ALLOW_ALL, user_agent, expires, status)
        # 429/5xx/unreachable, and a 3xx left over after the redirect budget is spent by a caller that
        # did not follow it: RFC 9309 says treat too many redirects as unavailable (allow).
        if 300 <= status < 400:
            return cls(ALLOW_ALL, user_agent, expires, status)
        return cls(DISALLOW_ALL, user_agent, expires, status)

    @property
    def parser(self) -> Protego | None:
        if self.mode != PARSED:
            return None
        if self._parser is None:
            self._parser = Protego.parse(self.body)
        return self._parser

    def allowed(self, url: str) -> bool:
        """May ``url`` (on this host) be fetched by our user agent? robots.txt itself always may."""
        if self.mode == ALLOW_ALL:
            return True
        if self.mode == DISALLOW_ALL:
            return url.split("?", 1)[0].endswith("/robots.txt")
        return bool(self.parser.can_fetch(url, ua_token(self.user_agent)))

    @property
    def crawl_delay(self) -> float | None:
        """``Crawl-delay`` (seconds) of the group matching our user agent, or None."""
        if self.mode != PARSED:
            return None
        delay = self.parser.crawl_delay(ua_token(self.user_agent))
        return float(delay) if delay is not None else None

    @property
    def sitemaps(self) -> list[str]:
        """``Sitemap:`` URLs listed in the file (any group)."""
        return list(self.parser.sitemaps) if self.mode == PARSED else []

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def to_dict(self) -> dict[str, Any]:
        """A msgpack/JSON-friendly form (for a shared cache in Redis)."""
        return {"mode": self.mode, "ua": self.user_agent, "expires": self.expires, "status": self.status,
                "body": self.body}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RobotsRules:
        return cls(d["mode"], d["ua"], float(d["expires"]), int(d.get("status", 0)), d.get("body", ""))

    def __getstate__(self) -> dict[str, Any]:
        return self.to_dict()  # the protego parser is rebuilt lazily after unpickling

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["mode"], state["ua"], state["expires"], state["status"], state["body"])
