"""URLs as browsers read them, and raycrawl's canonical form on top.

Parsing and resolution are the WHATWG URL Standard's, done by Ada (``ada-url``, the parser Node.js
uses): backslashes read as ``/`` in http(s) URLs, ``///host/path`` and ``https:host/path`` resolved as
a browser does, hosts mapped by UTS #46 (``faß.example`` → ``xn--fa-hia.example``), IPv4 number
forms (``0x7f.1``) read as addresses, and every URL a browser rejects (a space or ``%00`` in the
host, an invalid IPv4 address or punycode label, a bad port) rejected. A query written in a page
with a legacy encoding is percent-encoded in that encoding, as browsers do (URL Standard, "query
state").

The canonical form — what the sieve fingerprints and the crawler requests — is the Standard's
serialisation with a thin, idempotent policy on top (RFC 3986 §6.2.2 equivalences plus the usual
crawler conventions), each step leaving the resource the same:

* only ``http`` and ``https`` are kept;
* the fragment and any user info are dropped;
* a trailing dot of a DNS host is dropped (``a.test.`` and ``a.test`` are one name);
* percent-escapes of unreserved characters are decoded and the hex of the others upper-cased
  (``%7euser`` → ``~user``, ``%2f`` → ``%2F``);
* an empty query (``?`` alone) is dropped; otherwise the query is kept verbatim, in its order (the
  order of parameters can matter to a server).

:func:`canonicalize` is the one entry point for seeds, links, redirects and robots.txt keys;
:func:`explain` says why a URL is rejected (``raycrawl url``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ada_url import URL, idna_to_ascii, idna_to_unicode

DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
C0_SPACE = "".join(map(chr, range(0x21)))
"""What the URL Standard strips from both ends of an input: C0 controls and space (not other
Unicode spaces, which Python's ``str.strip()`` would also remove)."""
# Encodings whose query bytes are UTF-8 anyway (the Standard maps UTF-16 to UTF-8 for URLs).
_UTF8 = frozenset({"", "utf-8", "utf8", "utf_8", "utf-16", "utf-16-le", "utf-16-be", "utf_16", "utf_16_le",
                   "utf_16_be"})


def _fix_escape(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    return ch if ch in _UNRESERVED else "%" + m.group(1).upper()


def _normalise_escapes(part: str) -> str:
    return _PCT.sub(_fix_escape, part) if "%" in part else part


def _valid_ace(label: str) -> bool:
    """A label is a valid ``xn--`` (ACE) label if it decodes to Unicode that encodes back to it
    (Ada 4.0 lets some invalid ones through; the URL Standard rejects them, UTS #46 §4.1)."""
    if not label.startswith("xn--"):
        return True
    uni = idna_to_unicode(label)
    return bool(uni) and uni != label and idna_to_ascii(uni) == label.encode("ascii")


def encode_query(raw: str, encoding: str | None) -> str:
    """``raw`` with the non-ASCII characters of its query percent-encoded in ``encoding`` (a
    Python codec name), as a browser does for a link on a page in that encoding; characters the
    encoding cannot represent become ``%26%23NNN%3B`` (``&#NNN;``). UTF-8 pages: unchanged."""
    if encoding is None or encoding.lower() in _UTF8 or raw.isascii():
        return raw
    q = raw.find("?")
    h = raw.find("#")
    if q < 0 or 0 <= h < q:
        return raw
    end = h if h > q else len(raw)
    query = raw[q + 1 : end]
    if query.isascii():
        return raw
    out = []
    for ch in query:
        if ch.isascii():
            out.append(ch)
            continue
        try:
            data = ch.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            out.append(f"%26%23{ord(ch)}%3B")
            continue
        out.append("".join(f"%{b:02X}" for b in data))
    return raw[: q + 1] + "".join(out) + raw[end:]


def explain(url: str, base: str | None = None, encoding: str | None = None) -> tuple[str | None, str]:
    """(canonical URL, "") or (None, why it is rejected) for ``url`` resolved against ``base``."""
    raw = encode_query(url.strip(C0_SPACE), encoding)
    try:
        parsed = URL(raw, base) if base is not None else URL(raw)
    except ValueError:
        if base is not None:
            try:
                URL(base)
            except ValueError:
                return None, "invalid base URL"
        return None, "not a valid URL (WHATWG URL Standard)"
    scheme = parsed.protocol[:-1]
    if scheme not in DEFAULT_PORTS:
        return None, f"scheme {scheme!r} is not http(s)"
    host = parsed.hostname
    if not host.startswith("["):
        host = host.rstrip(".")
        if not host:
            return None, "empty host"
        if "xn--" in host and not all(map(_valid_ace, host.split("."))):
            return None, "invalid IDNA (punycode) label in host"
    netloc = f"{host}:{parsed.port}" if parsed.port else host
    path = _normalise_escapes(parsed.pathname)
    query = _normalise_escapes(parsed.search[1:])
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else ""), ""


def canonicalize(url: str, base: str | None = None, encoding: str | None = None) -> str | None:
    """The canonical form of ``url`` (resolved against ``base``; a query in a page of legacy
    ``encoding`` encoded in it), or None if it is not a crawlable http(s) URL."""
    return explain(url, base, encoding)[0]


def header_location(raw: bytes) -> str:
    """A ``Location`` header's bytes as the URL parser gets them in browsers: UTF-8 when they are
    UTF-8, otherwise each non-ASCII byte percent-encoded (never a decoding error)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(b) if b < 0x80 else f"%{b:02X}" for b in raw)


def host_of(url: str) -> str:
    """The host (with a non-default port) of a canonical URL."""
    return urlsplit(url).netloc


def split_host(url: str) -> tuple[str, str]:
    """(scheme://host[:port], path?query) of a canonical URL."""
    p = urlsplit(url)
    rest = p.path + (f"?{p.query}" if p.query else "")
    return f"{p.scheme}://{p.netloc}", rest


def is_ip_literal(host: str) -> bool:
    """An IP address (IPv6 in brackets or not), as the stdlib parses one, rather than a name."""
    import ipaddress

    # A name fails fast: an IPv4 literal ends in a digit and an IPv6 one has a colon, and the
    # ValueError ipaddress raises for a name cost 2 % of the fetch actor's CPU.
    if ":" not in host and not host[-1:].isdigit():
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False
