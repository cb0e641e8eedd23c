"""URL canonicalisation: one spelling per resource, so the sieve sees each page once.

Rules (RFC 3986 §6.2.2 plus the usual crawler conventions): resolve against the base, keep
only http/https, lower-case scheme and host (IDNA for non-ASCII hosts), drop a trailing dot
in the host, drop the default port and any user info, resolve dot-segments, an empty path
becomes ``/``, decode percent-escapes of unreserved characters, upper-case the hex of the
others, percent-encode characters that may not appear raw, drop the fragment. The query is
kept verbatim otherwise (parameter order can matter to servers).
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Characters allowed raw in a path or query (RFC 3986 pchar plus "/" and "?"), besides "%".
_ALLOWED = _UNRESERVED | frozenset("!$&'()*+,;=:@/?")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


def _normalise_escapes(part: str) -> str:
    def fix(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    part = _PCT.sub(fix, part)
    out = []
    for i, ch in enumerate(part):
        if ch in _ALLOWED or ch == "%" and _PCT.match(part, i):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def canonicalize(url: str, base: str | None = None) -> str | None:
    """The canonical form of ``url`` (resolved against ``base``), or None if it is not a
    crawlable http(s) URL (other schemes, no host, malformed port, unencodable host)."""
    url = url.strip()
    if base is not None:
        try:
            url = urljoin(base, url)
        except ValueError:
            return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        return None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return None
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host.lower()
    except UnicodeError:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = remove_dot_segments(_normalise_escapes(parts.path)) or "/"
    if not path.startswith("/"):
        path = "/" + path
    query = _normalise_escapes(parts.query)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def host_of(url: str) -> str:
    """The host (with a non-default port) of a canonical URL."""
    return urlsplit(url).netloc


def split_host(url: str) -> tuple[str, str]:
    """(scheme://host[:port], path?query) of a canonical URL."""
    p = urlsplit(url)
    rest = p.path + (f"?{p.query}" if p.query else "")
    return f"{p.scheme}://{p.netloc}", rest
