"""Which pages a crawl renders in a browser (issue 52): ``never``, ``always``, a URL pattern, or
``auto`` — the pages whose markup says scripts make what a reader sees.

``auto`` reads the HTML the server sent (selectolax) and gives its reason, or None:

* ``empty-root``: an application's mount point left empty — an element whose id is one the
  frameworks use (``root``, ``app``, ``__next``, ``__nuxt``, ``___gatsby``, …), Angular's
  ``<app-root>``, or one that carries ``ng-version``, ``data-reactroot``, ``data-v-app``, with no
  text and no element inside;
* ``noscript``: a ``<noscript>`` that asks for JavaScript ("enable JavaScript", "requires
  JavaScript", …);
* ``script-made``: little text (fewer than ``min_words`` words outside scripts) while an inline
  script writes markup (``innerHTML``, ``insertAdjacentHTML``, ``document.write``,
  ``appendChild``, ``fetch(``/``XMLHttpRequest`` for content), or the body is empty but for
  scripts that load others.

A page with its text in its markup is not rendered however many scripts it carries (analytics,
widgets): what rendering would add to it is what the reader sees anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

from raycrawl.settings import render_pattern

ROOT_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "main-app", "application", "svelte",
                      "react-root", "ember-app", "q-app"})
ROOT_ATTRS = ("ng-version", "data-reactroot", "data-v-app", "data-server-rendered")
ROOT_TAGS = ("app-root",)  # Angular's default mount element
ASKS_FOR_SCRIPTS = re.compile(r"(enable|turn on|activate|requires?|need|needs|use)\W+(\w+\W+){0,3}javascript|"
                              r"javascript\W+(\w+\W+){0,3}(required|disabled|enabled|needed)", re.I)
WRITES_MARKUP = re.compile(r"\.innerHTML\s*=|insertAdjacentHTML|document\.write|appendChild|\bfetch\s*\(|"
                           r"XMLHttpRequest|\.append\s*\(|createRoot|ReactDOM|new\s+Vue|createApp", re.I)
MIN_WORDS = 40


def needs_scripts(html: bytes | str, min_words: int = MIN_WORDS) -> str | None:
    """Why the page's markup needs scripts to show what a reader sees (``empty-root``,
    ``noscript``, ``script-made``), or None."""
    tree = LexborHTMLParser(html if isinstance(html, str) else html.decode("utf-8", "replace"))
    body = tree.body
    if body is None:
        return None
    for node in body.css(", ".join(["[id]", *(f"[{a}]" for a in ROOT_ATTRS), *ROOT_TAGS])):
        framework = (node.attributes.get("id") in ROOT_IDS or node.tag in ROOT_TAGS
                     or any(a in node.attributes for a in ROOT_ATTRS))
        if framework and _empty(node):
            return "empty-root"
    for node in tree.css("noscript"):
        if ASKS_FOR_SCRIPTS.search(node.text(deep=True) or ""):
            return "noscript"
    scripts = tree.css("script")
    if not scripts:
        return None
    inline = " ".join(s.text(deep=True) or "" for s in scripts if "src" not in s.attributes)
    loads = any("src" in s.attributes for s in scripts)
    for s in tree.css("script, style, noscript, template"):
        s.decompose()
    words = len((tree.body.text(deep=True, separator=" ") if tree.body is not None else "").split())
    if words < min_words and (WRITES_MARKUP.search(inline) or (loads and words == 0)):
        return "script-made"
    return None


def _empty(node) -> bool:  # noqa: ANN001 - a lexbor node
    """No text and no element inside (comments and whitespace aside)."""
    return not (node.text(deep=True) or "").strip() and all(c.tag == "-comment" for c in node.iter())


@dataclass(frozen=True)
class RenderPolicy:
    """The ``render`` choice: ``never``, ``always``, ``auto``, or a regular expression of URLs."""

    mode: str
    pattern: re.Pattern | None = None

    @classmethod
    def parse(cls, spec: str) -> RenderPolicy:
        spec = spec.strip()
        pattern = render_pattern(spec)
        return cls(spec) if pattern is None else cls("pattern", pattern)

    def wants(self, url: str, html: bytes | str) -> str | None:
        """Why ``url`` (whose markup is ``html``) is rendered, or None."""
        if self.mode == "never":
            return None
        if self.mode == "always":
            return "always"
        if self.mode == "pattern":
            return "pattern" if self.pattern.search(url) else None
        return needs_scripts(html)
