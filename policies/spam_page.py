"""The page-local content features of web spam (Ntoulas et al.; seed 003 part 2, §5.1): what one
HTML page and the popular-query list tell, with no corpus statistics — so the crawl-time gate
(policies/spam_gate.py) and the post-crawl features (tasks/spam_features.py) share them."""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from raycrawl.text import parse_html, tokens, visible_text

LOCAL_FEATURES = ("words", "title_words", "avg_word_len", "anchor_frac", "visible_frac", "compress_ratio",
                  "entropy", "query_precision", "query_recall")


@dataclass(slots=True)
class ParsedPage:
    words: list[str]
    title_words: int
    anchor_words: int
    html_bytes: int
    text_bytes: int
    text: str


def parse_page(html: bytes | str) -> ParsedPage:
    """One parse of an HTML page into what the features need (the project's text pipeline)."""
    tree = parse_html(html)
    text = visible_text(tree)
    title = tree.css_first("title")
    anchors = sum(len(tokens(a.text(separator=" "))) for a in tree.css("a"))
    html_len = len(html) if isinstance(html, bytes) else len(html.encode("utf-8", "replace"))
    return ParsedPage(tokens(text), len(tokens(title.text(separator=" "))) if title is not None else 0, anchors,
                      html_len, len(text.encode("utf-8", "replace")), text)


def page_local_features(p: ParsedPage, query_terms: frozenset[str]) -> np.ndarray:
    """The :data:`LOCAL_FEATURES` of one page (no corpus statistics: usable at crawl time)."""
    n = len(p.words)
    out = np.zeros(len(LOCAL_FEATURES))
    out[0] = n
    out[1] = p.title_words
    out[4] = p.text_bytes / max(p.html_bytes, 1)
    squeezed = " ".join(p.words).encode("utf-8")
    out[5] = len(squeezed) / len(zlib.compress(squeezed)) if squeezed else 0.0
    if n:
        out[2] = sum(map(len, p.words)) / n
        out[3] = min(p.anchor_words / n, 1.0)
        counts = np.fromiter(Counter(p.words).values(), dtype=np.float64)
        prob = counts / n
        out[6] = float(-(prob * np.log2(prob)).sum())
        if query_terms:
            out[7] = sum(w in query_terms for w in p.words) / n
            out[8] = len(query_terms.intersection(p.words)) / len(query_terms)
    return out


def host_name(url: str) -> str:
    """Host without port (the unit spam labels and features are about)."""
    return (urlsplit(url).hostname or "").lower()
