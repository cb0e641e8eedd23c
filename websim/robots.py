"""robots.txt variety for the in-vitro web, and the ground-truth verdicts (RFC 9309).

Every host gets one *robots kind*; the kind fixes what ``/robots.txt`` answers and the rules that
bind the crawler (user-agent product token ``raycrawl``). :func:`allowed` is a small, independent
RFC 9309 matcher (longest match wins, Allow wins ties, ``*`` and ``$`` patterns) used by the
manifest and the audit; tests cross-check it against protego.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: The product token the verdicts are computed for.
USER_AGENT = "raycrawl"

#: kind -> what /robots.txt does. Kinds with a body list it in :func:`robots_body`.
KINDS = (
    "missing",         # 404: everything allowed
    "allow_all",       # empty Disallow
    "basic",           # Disallow a directory with an Allow exception (longest match wins)
    "agent_groups",    # a group for raycrawl and a stricter one for everybody else
    "agent_excluded",  # raycrawl is excluded from the whole host, others are not
    "wildcards",       # * and $ patterns
    "error_5xx",       # 503: RFC 9309 says treat the host as fully disallowed
    "redirect",        # 301 to /robots-moved.txt, which holds "basic" rules
    "garbage",         # an HTML page instead of rules: nothing parses, everything allowed
)
#: Kinds serving the "basic" rules in forms a crawler must read as RFC 9309 does (websim.model
#: hands them to some "basic" hosts after the web is built).
BROWSER_KINDS = (
    "redirect_cross",  # 301 to http://PARTNER/robots-for/HOST.txt: another authority (§2.3.1.2)
    "bom_truncated",   # the file starts with two bytes of a UTF-8 byte-order mark
    "ray_group",       # a "User-agent: ray" group that disallows everything: not our product token
    "flaky_5xx",       # 503 to the first request, then the file: retried, not a day of disallow-all
)


@dataclass(frozen=True, slots=True)
class Rules:
    """The rules of the group that applies to ``raycrawl``: (allow, pattern) pairs."""

    rules: tuple[tuple[bool, str], ...] = ()
    disallow_all: bool = False  # a 5xx robots.txt (or unreachable): everything but robots.txt is off-limits
    crawl_delay: float | None = None

    def to_json(self) -> dict:
        return {"rules": [["allow" if a else "disallow", p] for a, p in self.rules],
                "disallow_all": self.disallow_all, "crawl_delay": self.crawl_delay}

    @classmethod
    def from_json(cls, d: dict) -> Rules:
        return cls(tuple((k == "allow", p) for k, p in d["rules"]), d["disallow_all"], d["crawl_delay"])


def robots_body(kind: str, crawl_delay: float | None) -> str | None:
    """The robots.txt text served for ``kind`` (None when the kind serves no rules file)."""
    delay = f"Crawl-delay: {crawl_delay:g}\n" if crawl_delay else ""
    basic = f"User-agent: *\nDisallow: /private/\nAllow: /private/open\n{delay}"
    match kind:
        case "missing" | "error_5xx":
            return None
        case "allow_all":
            return f"# nothing is off-limits\nUser-agent: *\nDisallow:\n{delay}"
        case "basic" | "redirect" | "redirect_cross" | "flaky_5xx":
            return basic
        case "bom_truncated":
            return basic  # the renderer puts two bytes of a UTF-8 byte-order mark in front
        case "ray_group":
            return f"User-agent: ray\nDisallow: /\n\n{basic}"
        case "agent_groups":
            return (f"User-agent: otherbot\nUser-agent: *\nDisallow: /\n\n"
                    f"User-agent: RayCrawl\nDisallow: /private/\nDisallow: /tmp\nAllow: /private/open\n{delay}")
        case "agent_excluded":
            return f"User-agent: raycrawl\nDisallow: /\n{delay}\nUser-agent: *\nAllow: /\n"
        case "wildcards":
            return (f"User-agent: *\nDisallow: /*.pdf$\nDisallow: /*?sort=\nDisallow: /private/\n"
                    f"Allow: /private/*.html$\n{delay}")
        case "garbage":
            return "<html><body><h1>Welcome!</h1><p>This is not a robots file.</p></body></html>\n"
    raise ValueError(f"unknown robots kind {kind!r}")


def rules_for(kind: str, crawl_delay: float | None) -> Rules:
    """The ground-truth rules binding ``raycrawl`` for a host of robots ``kind``."""
    match kind:
        case "missing" | "allow_all" | "garbage":
            return Rules((), False, None if kind != "allow_all" else crawl_delay)
        case "basic" | "redirect" | "redirect_cross" | "bom_truncated" | "ray_group" | "flaky_5xx":
            return Rules(((False, "/private/"), (True, "/private/open")), False, crawl_delay)
        case "agent_groups":
            return Rules(((False, "/private/"), (False, "/tmp"), (True, "/private/open")), False, crawl_delay)
        case "agent_excluded":
            return Rules(((False, "/"),), False, crawl_delay)
        case "wildcards":
            return Rules(((False, "/*.pdf$"), (False, "/*?sort="), (False, "/private/"),
                          (True, "/private/*.html$")), False, crawl_delay)
        case "error_5xx":
            return Rules((), True, None)
    raise ValueError(f"unknown robots kind {kind!r}")


@lru_cache(maxsize=4096)
def _compile(pattern: str) -> tuple[re.Pattern[str], int]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(part) for part in body.split("*")) + ("$" if anchored else "")
    return re.compile(regex), len(pattern)


def allowed(rules: Rules, path: str) -> bool:
    """RFC 9309 verdict for ``path`` (path and query, as sent on the wire)."""
    if path == "/robots.txt":
        return True
    if rules.disallow_all:
        return False
    best_len, best_allow = -1, True
    for allow, pattern in rules.rules:
        regex, length = _compile(pattern)
        if regex.match(path) and (length > best_len or (length == best_len and allow)):
            best_len, best_allow = length, allow
    return best_allow
