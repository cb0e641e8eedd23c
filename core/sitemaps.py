"""Sitemaps (sitemaps.org protocol 0.9) as a source of URLs.

A fetched resource is read as a sitemap when it is a 2xx XML response (or a gzip file, as
``sitemap.xml.gz`` usually is) whose root is ``<urlset>`` or ``<sitemapindex>``. Its ``<loc>``
entries become the resource's out-links: the pages of a ``urlset`` and the child sitemaps of an
index, which are read the same way when fetched. A sitemap reaches the crawl as a seed, or from a
``Sitemap:`` line of robots.txt (setting ``follow_sitemaps``).

The ``<loc>`` values are taken with a pattern, not an XML parser: a hostile or broken sitemap (a
billion-laughs entity, an unclosed tag) can neither blow up nor hide the entries before its fault.
The five predefined XML entities and character references are decoded, as the protocol requires
of URLs in a sitemap. A gzip body is decompressed to at most ``max_bytes`` (the protocol caps a
sitemap at 50 MB uncompressed).
"""

from __future__ import annotations

import html
import re
import zlib

SITEMAP_TYPES = frozenset({"application/xml", "text/xml", "application/x-gzip", "application/gzip"})
_ROOT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?(urlset|sitemapindex)[\s>]")
_LOC = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?loc\s*>\s*(.*?)\s*</(?:[A-Za-z_][\w.-]*:)?loc\s*>", re.DOTALL)
_GZIP = b"\x1f\x8b"
MAX_BYTES = 50 * 1024 * 1024


def _xml(body: bytes, max_bytes: int) -> bytes:
    """The body, gunzipped (at most ``max_bytes``) if it is a gzip file."""
    if not body.startswith(_GZIP):
        return body
    try:
        return zlib.decompressobj(wbits=31).decompress(body, max_bytes)
    except zlib.error:
        return b""


def read_sitemap(ctype: str | None, body: bytes, max_bytes: int = MAX_BYTES) -> list[str] | None:
    """The ``<loc>`` values of an XML (or gzip) response whose root element is a sitemap's,
    decoded, in document order (not yet resolved or canonicalised); None for anything else."""
    if (ctype or "").lower() not in SITEMAP_TYPES or not body:
        return None
    xml = _xml(body, max_bytes)
    return _locs(xml) if _ROOT.search(xml[:4096]) is not None else None


def is_sitemap(ctype: str | None, body: bytes, max_bytes: int = MAX_BYTES) -> bool:
    return read_sitemap(ctype, body, max_bytes) is not None


def sitemap_locs(body: bytes, max_bytes: int = MAX_BYTES) -> list[str]:
    """The ``<loc>`` values of a body, whatever its root element."""
    return _locs(_xml(body, max_bytes))


def _locs(xml: bytes) -> list[str]:
    return [html.unescape(m.group(1).decode("utf-8", "replace")) for m in _LOC.finditer(xml)]
