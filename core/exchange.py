"""One HTTP exchange as the crawl keeps it: what the fetcher produced, what the parser, the WARC
writer and the link records read. Below all of them (core), so storage does not import actors."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
LOCAL = "local"
"""The error kind of a fetch that failed on our side (no file descriptor left): not the host's fault."""
PROXY = "proxy"
"""The error kind of a fetch its proxy failed (unreachable, refused us): not the host's fault either."""
TRANSIENT_ERRORS = frozenset({"connect", "timeout", "reset"})
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class FetchResult:
    """One HTTP exchange (or the failure to have one)."""

    url: str
    ip: str
    status: int = 0  # 0: no response
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names; repeats joined by ", "
    body: bytes = b""  # decoded (Content-Encoding removed), capped
    ctype: str = ""  # media type, lower-case, no parameters
    started: float = 0.0
    ended: float = 0.0
    error: str | None = None
    redirect: str | None = None  # canonical Location of a 3xx
    # What the WARC writer needs to rebuild the exchange.
    request_head: bytes = b""  # request line + headers + CRLF CRLF, as sent
    status_line: str = ""  # e.g. "HTTP/1.1 200 OK"
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # response headers, in order
    http_version: str = ""
    # Why the body is not whole, as WARC 1.1's WARC-Truncated names it (None: it is whole): "length"
    # (cut at max_body or max_decompressed), "disconnect" (the server closed or reset the connection
    # before the end its Content-Length or chunked framing promised), "time" (a timeout mid-body).
    truncated: str | None = None
    wire_bytes: int = 0  # body bytes received (before decoding)
    via: str | None = None  # the proxy the request went through (its URL, no credentials), or None
    redacted: tuple[str, ...] = ()  # request headers whose secret values request_head shows as *** (core/site_sessions.py)

    @property
    def transient(self) -> bool:
        """Worth retrying later with back-off (connection trouble, 429, 5xx gateway errors)."""
        return self.error in TRANSIENT_ERRORS or (self.error is None and self.status in TRANSIENT_STATUSES)

    @property
    def charset(self) -> str | None:
        """The ``charset`` parameter of Content-Type, if any (not validated)."""
        return content_type_charset(self.headers.get("content-type", ""))


def content_type_charset(content_type: str) -> str | None:
    """The ``charset`` parameter of a Content-Type value, if any (not validated)."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'").lower()
    return None


class VisitKind(StrEnum):
    """What a finished visit was: a URL of the crawl (it gets a link record), or a robots.txt
    exchange (counted and archived, no link record)."""

    PAGE = "page"
    ROBOTS = "robots"
    RENDER = "render"
    """A page rendered in a browser (actors/visit/stages/render.py): no request of its own, its body
    the rendered DOM."""
    SESSION = "session"
    """A site's form login, or a page its site answered with its login wall (the session had expired:
    the page is fetched again once signed in): archived, no link record (actors/fetch/site_login.py)."""
