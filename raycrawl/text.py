"""The one text pipeline: HTML → visible text → tokens → (stopwords out) → Porter stems.

Every stage that looks at words (parser digests, dedup shingles, summaries, spam features,
the search index) goes through these functions so they all agree on what a "term" is.
"""

from __future__ import annotations

import re
from functools import lru_cache

import xxhash
from selectolax.lexbor import LexborHTMLParser

# Elements whose text a reader never sees.
INVISIBLE_TAGS = ("script", "style", "noscript", "template", "head")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


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
    return xxhash.xxh3_128_digest(normalized_text(text).encode("utf-8"))


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """The classic 318-word English list (Glasgow IR group's, as shipped by scikit-learn, offline).

    The ``stop-words`` package's English list has 1,333 entries including content words such as
    "world" and "hello", which would empty short pages.
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("porter")


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
