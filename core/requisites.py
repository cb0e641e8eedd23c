"""Page requisites: what a browser fetches to show a page — images, stylesheets, scripts, fonts,
media — as opposed to the pages it links to (Heritrix's ``E`` hops, wpull's ``--page-requisites``).

From HTML (the HTML standard's attributes): ``img[src|srcset]``, ``source[src|srcset]`` (in
``picture``, ``video``, ``audio``), ``link[href]`` whose ``rel`` has ``stylesheet``, ``icon``,
``preload`` or ``modulepreload``, ``script[src]``, ``video[src|poster]``, ``audio[src]``,
``track[src]``, ``embed[src]``, ``object[data]``, ``input[type=image][src]``, and the ``url()``
and ``@import`` of ``<style>`` blocks and ``style`` attributes. A ``srcset`` is split as the HTML
standard's "parse a srcset attribute" does (candidates end at a comma outside parentheses, which do
not nest; a URL ending in commas loses them). From CSS (a stylesheet, a ``<style>`` block, a ``style`` attribute):
every ``url()`` token or function, every string of an ``image-set()`` and every ``@import``, found by tinycss2 (a CSS Syntax Level 3
tokenizer), so comments, escapes and strings are read as browsers read them.

References come back raw, in document order, without repeats; the caller resolves them against
the document's base URL and encoding as it does links (a stylesheet's references resolve against
the stylesheet's own URL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import tinycss2

_ASCII_WS = " \t\n\f\r"
_REL = frozenset({"stylesheet", "icon", "preload", "modulepreload"})
_SRC = "img[src], source[src], script[src], video[src], audio[src], track[src], embed[src], input[src]"


def srcset_urls(value: str) -> list[str]:
    """The URLs of a ``srcset`` attribute (HTML standard, "parse a srcset attribute")."""
    urls, i, n = [], 0, len(value)
    while True:
        while i < n and (value[i] in _ASCII_WS or value[i] == ","):
            i += 1
        if i >= n:
            return urls
        start = i
        while i < n and value[i] not in _ASCII_WS:
            i += 1
        url = value[start:i]
        if url.endswith(","):
            urls.append(url.rstrip(","))
            continue
        urls.append(url)
        in_parens = False  # skip the descriptors: up to a comma outside parentheses (which do not nest)
        while i < n:
            c = value[i]
            if c == "(":
                in_parens = True
            elif c == ")":
                in_parens = False
            elif c == "," and not in_parens:
                i += 1
                break
            i += 1


def _css_refs(tokens: Iterable) -> Iterator[str]:
    for tok in tokens:
        if tok.type == "url":
            yield tok.value
        elif tok.type == "function":
            if tok.lower_name in ("url", "src"):
                strings = [a for a in tok.arguments if a.type == "string"]
                if strings:
                    yield strings[0].value
            elif tok.lower_name in ("image-set", "-webkit-image-set"):  # a bare string there is a URL too
                for a in tok.arguments:
                    if a.type == "string":
                        yield a.value
                    else:
                        yield from _css_refs([a])
            else:
                yield from _css_refs(tok.arguments)
        elif tok.type in ("() block", "[] block", "{} block"):
            yield from _css_refs(tok.content)


_MARKERS = ("url(", "src(", "image-set(", "@import")


def _may_refer(css: str) -> bool:
    """Without a backslash (an escape could spell a name), a reference needs one of ``_MARKERS``
    spelled out: most style attributes and blocks have none, and tokenizing them was most of the
    cost (measured: parsing pages with 20 styled images took +61 % with requisites, +16 % with this test)."""
    lowered = css.lower()
    return "\\" in css or any(m in lowered for m in _MARKERS)


def _unique(refs) -> list[str]:  # noqa: ANN001 - an iterable of raw references
    return list(dict.fromkeys(u for u in refs if u and u.strip(_ASCII_WS)))


def stylesheet_refs(css: str) -> tuple[list[str], list[str]]:
    """(every ``url()``, ``image-set()`` and ``@import`` reference, the ``@import``s alone) of a
    stylesheet, in order, without repeats: one tokenization for both."""
    if not _may_refer(css):
        return [], []
    found: list[str] = []
    imports: list[str] = []
    for rule in tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True):
        if _is_import(rule):
            target = _import_target(rule)
            found += target
            imports += target
        elif rule.type in ("at-rule", "qualified-rule"):
            found += _css_refs(rule.prelude or ())
            found += _css_refs(rule.content or ())
    return _unique(found), _unique(imports)


def css_urls(css: str, declarations_only: bool = False) -> list[str]:
    """The ``url()`` and ``@import`` references of a stylesheet (``declarations_only``: of a
    ``style`` attribute's declaration list), in order, without repeats."""
    if not declarations_only:
        return stylesheet_refs(css)[0]
    if not _may_refer(css):
        return []
    nodes = tinycss2.parse_blocks_contents(css, skip_comments=True, skip_whitespace=True)
    return _unique(_css_refs(t for node in nodes if node.type == "declaration" for t in node.value))


def _is_import(rule) -> bool:  # noqa: ANN001 - a tinycss2 rule
    return rule.type == "at-rule" and rule.lower_at_keyword == "import"


def _import_target(rule) -> list[str]:  # noqa: ANN001 - a tinycss2 @import rule
    """What an ``@import`` names: its first token, a string or a ``url()``."""
    first = next((t for t in rule.prelude if t.type not in ("whitespace", "comment")), None)
    if first is None:
        return []
    return [first.value] if first.type == "string" else list(_css_refs([first]))


def html_refs(tree) -> tuple[list[str], list[str]]:  # noqa: ANN001 - a selectolax (lexbor) tree
    """(the raw requisite references of a parsed HTML document in document order, those of them
    that are stylesheets — ``link rel=stylesheet``, a ``<style>``'s ``@import``s — which may have
    requisites of their own): one walk, each ``<style>`` tokenized once."""
    found: list[str] = []
    sheets: list[str] = []
    for node in tree.css(f"{_SRC}, img[srcset], source[srcset], link[href], video[poster], object[data], "
                         "style, [style]"):
        attrs = node.attributes
        tag = node.tag
        if tag == "link":
            rel = set((attrs.get("rel") or "").lower().split())
            if _REL & rel:
                found.append(attrs.get("href") or "")
            if "stylesheet" in rel:
                sheets.append(attrs.get("href") or "")
        elif tag == "style":
            refs, imports = stylesheet_refs(node.text(deep=True) or "")
            found += refs
            sheets += imports
        elif tag == "object":
            found.append(attrs.get("data") or "")
        elif tag == "input":
            if (attrs.get("type") or "").strip(_ASCII_WS).lower() == "image" and attrs.get("src"):
                found.append(attrs["src"])
        else:
            if attrs.get("src") and tag != "input":
                found.append(attrs["src"])
            if tag in ("img", "source") and attrs.get("srcset"):
                found += srcset_urls(attrs["srcset"])
            if tag == "video" and attrs.get("poster"):
                found.append(attrs["poster"])
        if attrs.get("style"):
            found += css_urls(attrs["style"], declarations_only=True)
    return _unique(found), _unique(sheets)


def html_requisites(tree) -> list[str]:  # noqa: ANN001 - a selectolax (lexbor) tree
    """The raw requisite references of a parsed HTML document, in document order."""
    return html_refs(tree)[0]
