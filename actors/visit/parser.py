"""Parsers: fetched HTML → canonical out-links, title, visible text and content digest.

One lexbor parse per page (selectolax), shared by link extraction and the text pipeline of
``raycrawl.text``. What counts:

* links from ``a[href]``, ``area[href]``, ``frame[src]``, ``iframe[src]`` and a
  ``<meta http-equiv=refresh>`` read as the HTML standard's declarative refresh steps (a refresh
  without a URL reloads the page: no link), resolved as a browser does against ``<base href>``
  (the first one, itself resolved against the page URL), with a query percent-encoded in the
  page's encoding, and canonicalised by ``raycrawl.urls.canonicalize``; non-http(s) and
  unparseable ones are dropped, repeats collapse to the first occurrence;
* ``<link rel=canonical href>`` is recorded (``canonical``), not followed;
* ``rel="nofollow"`` drops that link; ``<meta name="robots">`` or ``<meta name="TOKEN">`` (our
  product token) and ``X-Robots-Tag`` — unscoped, or scoped to our token (``raycrawl: nofollow``;
  ``otherbot: nofollow`` is not for us) — ``nofollow`` / ``none`` drops all links, ``noindex`` /
  ``none`` sets ``noindex``;
* the body is decoded, and a binary one recognised, by ``raycrawl.text`` (``decode_body``,
  ``looks_binary``: the browsers' character-set rules); a binary body gets no links, no text, no
  digest — whatever the Content-Type claims.

A 2xx sitemap (``raycrawl.sitemaps``) yields its ``<loc>`` entries as links, canonicalised, and
nothing else. Otherwise only 2xx responses with an HTML or XHTML type are parsed (a response
without Content-Type is sniffed: a body starting with ``<!doctype html``/``<html`` is HTML);
``text/plain`` gets text and digest, no links. Anything else yields an empty result. ``parse`` never raises on page content.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from raycrawl.exchange import FetchResult
from raycrawl.policies.robots import ua_token
from raycrawl.requisites import html_refs, stylesheet_refs
from raycrawl.sitemaps import read_sitemap
from raycrawl.storage.crawl_pages import HTML_TYPES
from raycrawl.text import decode_body, digest_of_tokens, html_tree, looks_binary, tokens, visible_text
from raycrawl.urls import C0_SPACE, canonicalize

log = logging.getLogger(__name__)

TEXT_TYPES = frozenset({"text/plain"})
MAX_TITLE = 1000
_ASCII_WS = " \t\n\f\r"
# X-Robots-Tag directives that carry a value after a colon (so "name:" there is not a bot scope).
_VALUED_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_SCOPE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*:(.*)$", re.DOTALL)


@dataclass
class ParseResult:
    url: str
    links: list[str] = field(default_factory=list)  # canonical, document order, no repeats
    digest: bytes | None = None  # raycrawl.text.content_digest of the visible text
    title: str = ""
    text: str = ""  # visible text (title first), whitespace-separated
    # Its tokens (raycrawl.text.tokens), for the sketches and summaries made in the parser's own
    # process (actors/visit/parsing_worker.py), which sends None on.
    words: list[str] | None = None
    noindex: bool = False
    nofollow: bool = False
    charset: str = ""  # the codec the body was decoded with ("" if not decoded)
    canonical: str | None = None  # <link rel=canonical href>, canonical form
    binary: bool = False  # body is not text, whatever its Content-Type says
    score: float | None = None  # a focused crawl's classifier score of the page (policies/focus.py)
    sitemap: bool = False  # a sitemap: its <loc> entries are the links (core/sitemaps.py)
    embeds: list[str] = field(default_factory=list)  # page requisites (core/requisites.py), canonical
    sheets: list[str] = field(default_factory=list)  # those of the embeds that are stylesheets


def sniff_type(body: bytes) -> str:
    """"text/html" for a body without Content-Type that starts like HTML, else ""."""
    head = body[:512].lstrip(b" \t\r\n\xef\xbb\xbf").lower()
    return "text/html" if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) else ""


def _robots_tokens(content: str) -> set[str]:
    return {t.strip().lower() for t in re.split(r"[,\s]+", content) if t.strip()}


def _directory(base: str) -> str:
    """``scheme://host/dir/`` of a canonical URL: all that resolving a path reference depends on."""
    path_end = base.split("?", 1)[0]
    return path_end[: path_end.rfind("/") + 1]


def refresh_target(content: str) -> str | None:
    """The URL string of a ``<meta http-equiv=refresh content=…>``, per the HTML standard's shared
    declarative refresh steps; None when the content is invalid or names no URL (a reload)."""
    pos, n = 0, len(content)

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and content[pos] in _ASCII_WS:
            pos += 1

    skip_ws()
    start = pos
    while pos < n and content[pos].isascii() and content[pos].isdigit():
        pos += 1
    if pos == start and (pos >= n or content[pos] != "."):
        return None
    while pos < n and (content[pos] == "." or content[pos].isascii() and content[pos].isdigit()):
        pos += 1
    if pos < n:
        if content[pos] not in ";," + _ASCII_WS:
            return None
        skip_ws()
        if pos < n and content[pos] in ";,":
            pos += 1
        skip_ws()
    if pos >= n:
        return None
    for letter in "url":  # "URL" case-insensitively, then "=", else straight to the quotes step
        if pos < n and content[pos].lower() == letter:
            pos += 1
        else:
            break
    else:
        skip_ws()
        if pos < n and content[pos] == "=":
            pos += 1
            skip_ws()
    quote = content[pos] if pos < n and content[pos] in "'\"" else ""
    pos += bool(quote)
    url = content[pos:]
    if quote and quote in url:
        url = url[: url.index(quote)]
    return url


def x_robots_tokens(raw_headers: list[tuple[bytes, bytes]], token: str) -> set[str]:
    """Directives of the ``X-Robots-Tag`` header lines that apply to the crawler whose product
    token is ``token``: unscoped lines, and lines scoped ``token: …`` (case-insensitive)."""
    out: set[str] = set()
    for name, value in raw_headers:
        if name.lower() != b"x-robots-tag":
            continue
        text = value.decode("latin-1")
        m = _SCOPE.match(text)
        if m and m.group(1).lower() not in _VALUED_DIRECTIVES:
            if m.group(1).lower() != token:
                continue
            text = m.group(2)
        out |= _robots_tokens(text)
    return out


@lru_cache(maxsize=1 << 16)
def _canonical_cached(base: str, raw: str, encoding: str | None) -> str | None:
    return canonicalize(raw, base=base, encoding=encoding)


def resolve_link(base: str, base_dir: str, raw: str, encoding: str | None = None) -> str | None:
    """``canonicalize(raw, base=base, encoding=encoding)``, memoised. Canonicalisation is most of the parse time, and
    pages of a site repeat the same references (menus, footers); a reference resolves the same
    against the base's directory whenever it has a path or an authority (RFC 3986 §5.2.2), so the cache
    is keyed by the directory then and hits across all pages of a directory."""
    raw = raw.strip(C0_SPACE)
    # The URL parser drops tabs/newlines anywhere, which can change the form of the reference:
    # judge printable ones only, key the rest by the full base (always right).
    return _canonical_cached(base_dir if raw.isprintable() and _path_reference(raw) else base, raw, encoding)


def _path_reference(raw: str) -> bool:
    """True if ``raw`` certainly has a non-empty path or an authority, so that resolving it ignores
    the base's last segment and query. Doubtful forms (scheme-like prefixes, ``//`` alone) say False."""
    if not raw or raw[0] in "?#":
        return False
    raw = raw.replace("\\", "/")  # http(s) URLs read a backslash as a slash
    if raw.startswith("//"):
        return len(raw) > 2 and raw[2] not in "/?#"
    if raw[0] == "/":
        return True
    return ":" not in raw.split("/", 1)[0]


def _resolved(refs: tuple[list[str], list[str]], base: str, base_dir: str, enc: str | None
              ) -> tuple[list[str], list[str]]:
    """(requisites, stylesheets) resolved as links are, without repeats."""
    return tuple(list(dict.fromkeys(u for u in (resolve_link(base, base_dir, raw, enc) for raw in part) if u))
                 for part in refs)  # type: ignore[return-value]


class Parser:
    """Stateless; one instance can parse any number of pages (thread-safe)."""

    def __init__(self, user_agent: str = "") -> None:
        # <meta name="raycrawl" content="nofollow"> addresses us like name="robots" does.
        self.token = ua_token(user_agent).lower() if user_agent.strip() else ""
        self.meta_names = {"robots"} | ({self.token} if self.token else set())

    def parse(self, fr: FetchResult) -> ParseResult:
        """Links, text, title and digest of a fetched page (see the module doc for the rules)."""
        result = ParseResult(url=fr.url)
        locs = read_sitemap(fr.ctype, fr.body) if 200 <= fr.status < 300 else None
        if locs is not None:
            result.sitemap = True
            base = canonicalize(fr.url) or fr.url
            links = (canonicalize(raw, base) for raw in locs)
            result.links = list(dict.fromkeys(u for u in links if u and u.startswith(("http://", "https://"))))
            return result
        ctype = fr.ctype or sniff_type(fr.body)
        if ctype == "text/css" and 200 <= fr.status < 300 and fr.body:
            css, result.charset = decode_body(fr.body, fr.charset)
            base = canonicalize(fr.url) or fr.url  # a stylesheet's references resolve against it
            result.embeds, result.sheets = _resolved(stylesheet_refs(css), base, _directory(base), result.charset or None)
            return result
        if not (200 <= fr.status < 300) or ctype not in HTML_TYPES | TEXT_TYPES or not fr.body:
            return result
        if looks_binary(fr.body):
            result.binary = True
            return result
        header_robots = x_robots_tokens(fr.raw_headers, self.token)
        result.noindex = bool(header_robots & {"noindex", "none"})
        result.nofollow = bool(header_robots & {"nofollow", "none"})
        html, result.charset = decode_body(fr.body, fr.charset)
        if ctype in TEXT_TYPES:
            result.text = html
            result.words = tokens(html)
            result.digest = digest_of_tokens(result.words)
            return result
        try:
            self._parse_html(html, result)
        except Exception as e:  # noqa: BLE001 - lexbor repairs almost anything; never lose the page
            log.warning("parse failed for %s: %r", fr.url, e)
            result.links = []
        return result

    def _parse_html(self, html: str, result: ParseResult) -> None:
        tree = html_tree(html)
        title = tree.css_first("title")
        if title is not None:
            result.title = " ".join(title.text(separator=" ").split())[:MAX_TITLE]
        refresh: str | None = None
        refresh_seen = False
        for meta in tree.css("meta"):
            attrs = meta.attributes
            name = (attrs.get("name") or "").strip().lower()
            if name in self.meta_names:
                directives = _robots_tokens(attrs.get("content") or "")
                result.noindex |= bool(directives & {"noindex", "none"})
                result.nofollow |= bool(directives & {"nofollow", "none"})
            elif (attrs.get("http-equiv") or "").strip(_ASCII_WS).lower() == "refresh" and not refresh_seen:
                refresh_seen = True  # only the first refresh meta counts
                refresh = refresh_target(attrs.get("content") or "")
        result.text = visible_text(tree)
        result.words = tokens(result.text)
        result.digest = digest_of_tokens(result.words)
        if result.nofollow:
            return
        enc = result.charset or None
        base = canonicalize(result.url) or result.url
        base_node = tree.css_first("base[href]")
        if base_node is not None:
            base = canonicalize(base_node.attributes.get("href") or "", base, enc) or base
        for node in tree.css("link[rel][href]"):
            if "canonical" in (node.attributes.get("rel") or "").lower().split():
                result.canonical = canonicalize(node.attributes.get("href") or "", base, enc)
                break
        base_dir = _directory(base)
        seen: set[str] = set()
        seen_raw: set[str] = set()
        links: list[str] = []

        def add(raw: str | None) -> None:
            if raw is None or raw in seen_raw:  # href="" is a link to the page itself, as in a browser
                return
            seen_raw.add(raw)
            url = resolve_link(base, base_dir, raw, enc)
            if url is not None and url not in seen:
                seen.add(url)
                links.append(url)

        for node in tree.css("a[href], area[href], frame[src], iframe[src]"):
            attrs: dict[str, Any] = node.attributes
            if node.tag in ("a", "area"):
                if "nofollow" in (attrs.get("rel") or "").lower().split():
                    continue
                add(attrs.get("href"))
            else:
                add(attrs.get("src"))
        add(refresh)
        result.links = links
        result.embeds, result.sheets = _resolved(html_refs(tree), base, base_dir, enc)


class BatchParser:
    """The parser's role in the parsing worker (actors/visit/parsing_worker.py): batches of fetched
    pages parsed, then the stages' work on the results (a focused crawl's scores, near-duplicate
    sketches: :meth:`VisitStage.parser_work`). Holds nothing between batches: a restarted worker
    parses a retried batch the same way."""

    def __init__(self, user_agent: str = "") -> None:
        self.parser = Parser(user_agent)

    def parse(self, batch: list[FetchResult], works: dict | None = None) -> tuple[list[ParseResult], dict]:
        """The parse results, and what each of ``works`` (stage name → callable) made of them."""
        results = [self.parser.parse(fr) for fr in batch]
        return results, {name: work(results) for name, work in (works or {}).items()}


def words_of(result: ParseResult) -> list[str]:
    """A parse result's tokens: kept by the parser, else (none kept) of its text."""
    return result.words if result.words is not None else tokens(result.text)
