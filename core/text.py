"""The one text pipeline: bytes → HTML → visible text → tokens → (stopwords out) → Porter stems.

Every stage that looks at words (parser digests, dedup shingles, summaries, spam features,
the search index) goes through these functions so they all agree on what a "term" is.

A page's bytes become text by the browsers' rules: the character set comes from a BOM, the
Content-Type ``charset``, a ``<meta charset>`` / ``http-equiv`` in the first 4 KiB, else UTF-8 if it
decodes, else windows-1252 (WHATWG's fallback; ISO-8859-1 and ASCII labels mean windows-1252 too);
bytes that don't decode are replaced. A body that is not text (NUL bytes / control characters near
the start) is "binary": no text (:func:`looks_binary`).
"""

from __future__ import annotations

import codecs
import logging
import re
from collections import Counter
from functools import lru_cache

import xxhash
from selectolax.lexbor import LexborHTMLParser

# Elements whose text a reader never sees.
INVISIBLE_TAGS = ("script", "style", "noscript", "template", "head")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.\-]+)""", re.IGNORECASE)
_WHATWG_ALIASES = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "us-ascii": "cp1252",
                   "ascii": "cp1252", "iso8859-1": "cp1252"}
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_CONTROL = bytes([*range(0, 9), *range(14, 32)])
log = logging.getLogger(__name__)


def parse_html(html: str | bytes) -> LexborHTMLParser:
    """Parse once; callers that need links and text share the tree."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    return LexborHTMLParser(html)


def visible_text(tree_or_html: LexborHTMLParser | str | bytes) -> str:
    """Text a browser would show, whitespace-separated. Malformed HTML is repaired by lexbor."""
    tree = tree_or_html if isinstance(tree_or_html, LexborHTMLParser) else parse_html(tree_or_html)
    title = tree.css_first("title")
    title_text = title.text(separator=" ") if title is not None else ""
    root = tree.body or tree.root
    if root is None:
        return title_text
    root = root.clone() if hasattr(root, "clone") else root
    for tag in INVISIBLE_TAGS:
        for node in root.css(tag):
            node.decompose()
    body = root.text(separator=" ", strip=False)
    return f"{title_text} {body}" if title_text else body


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits, any script)."""
    return _TOKEN.findall(text.lower())


def normalized_text(text: str) -> str:
    """Tokens joined by single spaces: the text exact-duplicate digests are computed on."""
    return " ".join(tokens(text))


def content_digest(text: str) -> bytes:
    """128-bit digest of the normalised visible text (BUbiNG's rule: markup changes don't count)."""
    return digest_of_tokens(tokens(text))


def digest_of_tokens(words: list[str]) -> bytes:
    """:func:`content_digest` of a text whose :func:`tokens` are ``words``."""
    return xxhash.xxh3_128_digest(" ".join(words).encode("utf-8"))


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """The classic 318-word English list (Glasgow IR group's, as scikit-learn ships it: a copy,
    core/stopwords_en.py says why).

    The ``stop-words`` package's English list has 1,333 entries including content words such as
    "world" and "hello", which would empty short pages.
    """
    from raycrawl.stopwords_en import ENGLISH

    return ENGLISH


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("porter")


def term_counts(words: list[str]) -> dict[str, int]:
    """{Porter stem: count} of ``words`` (tokenised), stopwords out: ``Counter(stems(words))``,
    in the same order, each distinct word stemmed once."""
    counts = Counter(words)
    for stop in stopwords() & counts.keys():
        del counts[stop]
    out: dict[str, int] = {}
    for stem, n in zip(_stems_of(list(counts)), counts.values(), strict=True):
        out[stem] = out.get(stem, 0) + n
    return out


_STEMS: dict[str, str] = {}  # word → Porter stem, for the words a crawl meets again and again
_STEMS_MAX = 200_000  # (then emptied: a crawl's vocabulary grows without end, its common words come back)


def _stems_of(words: list[str]) -> list[str]:
    """Porter stems of ``words``, most from :data:`_STEMS` (a dict lookup is ~7× cheaper than
    PyStemmer's own cache, measured on 300-word pages)."""
    cache = _STEMS
    out = [cache.get(w) for w in words]
    missing = [w for w, s in zip(words, out, strict=True) if s is None]
    if missing:
        fresh = dict(zip(missing, _stemmer().stemWords(missing), strict=True))
        if len(cache) > _STEMS_MAX:
            cache.clear()
        cache.update(fresh)
        out = [s if s is not None else fresh[w] for w, s in zip(words, out, strict=True)]
    return out


def stems(words: list[str], drop_stopwords: bool = True) -> list[str]:
    """Porter stems of ``words`` (already tokenised), stopwords removed first."""
    if drop_stopwords:
        stop = stopwords()
        words = [w for w in words if w not in stop]
    return _stemmer().stemWords(words)


def terms(html_or_text: str | bytes, is_html: bool = True) -> list[str]:
    """The full pipeline: the terms of a document, in order (duplicates kept)."""
    text = visible_text(html_or_text) if is_html else str(html_or_text)
    return stems(tokens(text))


def looks_binary(body: bytes, sample: int = 1024) -> bool:
    """NUL bytes, or > 10 % control characters, in the first ``sample`` bytes (UTF-16 BOMs excepted)."""
    head = body[:sample]
    if not head or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if b"\0" in head:
        return True
    # bytes.translate deletes the control bytes in C (a Python loop over the sample was 8 % of the
    # parser's time, benchmarks/profile_crawl.py)
    return len(head) - len(head.translate(None, _CONTROL)) > len(head) // 10


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _WHATWG_ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # An HTML page cannot really be UTF-16 without a BOM (the meta would not be ASCII-readable).
    return None if name.startswith(("utf-16", "utf-32")) else name


def decode_body(body: bytes, header_charset: str | None) -> tuple[str, str]:
    """(text, codec name) of a page's body by the charset rules above; never raises."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, errors="replace"), name
    name = _codec(header_charset)
    if name is None:
        m = _META_CHARSET.search(body[:4096])
        name = _codec(m.group(1).decode("ascii", "replace")) if m else None
    if name is not None:
        return body.decode(name, errors="replace"), name
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace"), "cp1252"


def html_tree(html: str):
    """The lexbor tree of a page's decoded text."""
    # lexbor stops a text node at NUL; a browser shows U+FFFD there.
    return parse_html(html.replace("\0", "\ufffd"))


def page_text(body: bytes, header_charset: str | None) -> str:
    """The visible text the parser (``actors.visit.parser.Parser.parse``) gives an HTML page with this body: "" for a binary
    body, else the text of the decoded page. Summaries are built from it, at crawl time (where the
    parser's own text is used) and afterwards from the WARC, so both read a page the same way."""
    if not body or looks_binary(body):
        return ""
    try:
        return visible_text(html_tree(decode_body(body, header_charset)[0]))
    except Exception as e:  # noqa: BLE001 - as the parser: no text, the page is still kept
        log.warning("no visible text: %r", e)
        return ""
