"""robots.txt rules for one host, per RFC 9309, with status semantics and an expiry.

* 2xx: the body is parsed by protego (only the first 512 KiB; RFC 9309 §2.5 lets us stop at
  500 KiB) after two corrections protego does not make: a byte-order mark, whole or truncated
  (``EF BB BF``, ``EF BB``, ``EF``), or a UTF-16 one, is removed rather than swallowing the first
  line; and a group applies to us only if its ``User-agent`` product token (the leading run of
  letters, ``_`` and ``-``, §2.2.1) *equals* ours case-insensitively (protego also takes
  ``ray`` for ``raycrawl``);
* 3xx: the crawler follows up to 5 redirects, also to other authorities
  (``actors.fetch.fetch_loop``); past that the file is "unavailable" (§2.3.1.2) and treated as 4xx;
* 4xx (except 429): unavailable — everything is allowed (§2.3.1.3);
* 429, 5xx, or no response at all (status 0: DNS, connect, timeout…): unreachable — everything
  is disallowed (§2.3.1.4). The crawler first retries with back-off; the verdict it finally
  stores expires after at most :data:`UNREACHABLE_TTL`, well before the normal TTL (``Settings.robots_ttl``), so the host
  is checked again soon.

``/robots.txt`` itself is always allowed (§2.2.2). Rules expire ``ttl`` seconds after they were
fetched (the crawler re-fetches robots.txt then).
"""

from __future__ import annotations

import codecs
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from protego import Protego

log = logging.getLogger(__name__)

PARSE_LIMIT = 512 * 1024
"""Bytes of a robots.txt parsed (and fetched, whatever ``max_body`` says)."""
MAX_HOPS = 5
"""Redirects followed for one robots.txt (RFC 9309 §2.3.1.2: at least five)."""
ALLOW_ALL = "allow"
DISALLOW_ALL = "disallow"
PARSED = "parsed"
UNREACHABLE_TTL = 1800.0
"""Seconds at most a "disallow all" verdict (robots.txt unreachable after the retries) is kept."""
# protego's spellings of the User-agent field (with or without the colon).
_UA_LINE = re.compile(r"^\s*(user[-\s]?agent)\s*(?::\s*|\s+)(.*)$", re.IGNORECASE)
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
_OTHER = "\x01"  # a group value that matches no product token


def decode_robots(body: bytes) -> str:
    """robots.txt bytes as text: UTF-8 (undecodable bytes replaced) after removing a byte-order
    mark, even a truncated one; a UTF-16 file (with its BOM) is decoded as such."""
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if body.startswith(bom):
            return body[len(bom):].decode(codec, errors="replace")
    for bom in (codecs.BOM_UTF8, codecs.BOM_UTF8[:2], codecs.BOM_UTF8[:1]):
        if body.startswith(bom):
            body = body[len(bom):]
            break
    return body.decode("utf-8", errors="replace")


def for_token(text: str, token: str) -> str:
    """``text`` with each User-agent line rewritten so that protego, asked for ``token``, picks the
    group RFC 9309 picks: ``*`` stays, a value whose product token equals ``token``
    (case-insensitively) becomes ``token``, any other becomes a value that matches nothing."""
    token = token.lower()
    out = []
    for line in text.splitlines():
        m = _UA_LINE.match(line.split("#", 1)[0])
        if m is not None:
            value = m.group(2).strip()
            if value.startswith("*"):
                value = "*"
            elif value:
                t = _PRODUCT_TOKEN.match(value)
                value = token if t is not None and t.group().lower() == token else _OTHER
            line = f"User-agent: {value}"
        out.append(line)
    return "\n".join(out)


def ua_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against: ``raycrawl/0.1 (+url)`` → ``raycrawl``."""
    token = user_agent.strip().split()[0] if user_agent.strip() else "*"
    return token.split("/")[0] or "*"


def sitemaps_of(body: bytes) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt body (they belong to no group), as written."""
    return list(Protego.parse(decode_robots(body[:PARSE_LIMIT])).sitemaps)


# The status of rules made when robots.txt was never reached because its proxy failed for
# ``proxy_patience`` (core/proxies.py): unavailable, as for no response, but the pages it holds
# back are recorded as the proxy's failure (``proxy``), not the site's.
PROXY_FAILED = -1


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
            return cls(PARSED, user_agent, expires, status, decode_robots(body[:PARSE_LIMIT]))
        if 400 <= status < 500 and status != 429:
            return cls(ALLOW_ALL, user_agent, expires, status)
        # 429/5xx/unreachable, and a 3xx left over after the redirect budget is spent by a caller that
        # did not follow it: RFC 9309 says treat too many redirects as unavailable (allow).
        if 300 <= status < 400:
            return cls(ALLOW_ALL, user_agent, expires, status)
        return cls(DISALLOW_ALL, user_agent, now + min(ttl, UNREACHABLE_TTL), status)

    @property
    def parser(self) -> Protego | None:
        if self.mode != PARSED:
            return None
        if self._parser is None:
            self._parser = Protego.parse(for_token(self.body, ua_token(self.user_agent)))
        return self._parser

    def allowed(self, url: str) -> bool:
        """May ``url`` (on this host) be fetched by our user agent? robots.txt itself always may."""
        if self.mode == ALLOW_ALL:
            return True
        if self.mode == DISALLOW_ALL:
            return url.split("?", 1)[0].endswith("/robots.txt")
        return bool(self.parser.can_fetch(url, ua_token(self.user_agent)))

    def decided_by(self, url: str) -> str:
        """The rule that decides ``url`` (for ``raycrawl robots check``): ``"allow: PATTERN"`` /
        ``"disallow: PATTERN"`` (as protego normalised it), or why no rule of a group applies."""
        if self.mode == ALLOW_ALL:
            return f"robots.txt unavailable (status {self.status}): everything allowed"
        if self.mode == DISALLOW_ALL:
            return f"robots.txt unreachable (status {self.status or 'none'}): everything disallowed"
        if url.split("?", 1)[0].endswith("/robots.txt"):
            return "/robots.txt is always allowed"
        # protego keeps a group's rules most specific first and stops at the first match.
        rule_set = self.parser._get_matching_rule_set(ua_token(self.user_agent))
        if rule_set is None:
            return "no group for our product token and no * group"
        from protego._utils import _quote_path

        quoted = _quote_path(url)
        for rule in rule_set._rules:
            if rule.value.match(quoted):
                return f"{rule.field}: {rule.value._pattern} (group {rule_set.user_agent!r})"
        return f"no rule of group {rule_set.user_agent!r} matches"

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
