"""Scope rules: which URLs a crawl may fetch, as archivists and scrapers write them.

Two kinds of rule, each as an allow list and a deny list (settings ``scope_allow``,
``scope_deny``, ``scope_allow_surts``, ``scope_deny_surts``):

* regular expressions searched anywhere in the canonical URL (Scrapy's ``allow``/``deny``, Nutch's
  regex-urlfilter);
* SURT prefixes (Heritrix's ``SurtPrefixedDecideRule``): the URL in Sort-friendly URI Reordering
  Transform form (``http://www.example.org/a`` → ``org,example,www,)/a``, the ``surt`` package that
  pywb and cdxj-indexer use; a port goes after the host's comma, ``org,example,:8080)/``, as in
  Heritrix) must start with one of them. A prefix may be written as a SURT
  (``org,example,`` = the host and its subdomains; ``org,example,www)/docs/`` = a path; the form
  with a scheme, ``http://(org,example,``, is Heritrix's and is accepted too) or as a plain URL,
  turned into one as Heritrix does: ``http://example.org/`` covers the host and its subdomains,
  ``http://example.org/docs/`` that path. The scheme is not compared.

A URL is in scope when no allow rule is given or it matches one of either kind, and no deny rule
of either kind matches it: deny wins.

Parsed and checked here; the prefetch filter that applies them is
:class:`raycrawl.policies.filters.Scope`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

import surt

from raycrawl.errors import UserError
from raycrawl.urls import canonicalize


def url_surt(url: str) -> str:
    """The canonical URL's SURT with a comma after the host (``org,example,www,)/a``): a host
    prefix ``org,example,`` then matches the host and its subdomains, never ``org,examples``. The
    path is kept as the URL has it (the crawler's URLs are already canonical, WHATWG): Heritrix
    compares it case-sensitively, slash included, where the ``surt`` package's default
    canonicalizer would lower-case it and drop a trailing slash."""
    return _port_last(surt.surt(url, canonicalizer=_as_is, trailing_comma=True, host_massage=False))


def _port_last(key: str) -> str:
    """``test,a:8080,)/x`` (the surt package's form) → ``test,a,:8080)/x`` (Heritrix's): so that
    ``test,a,`` covers the host on every port."""
    host, paren, rest = key.partition(")")
    m = re.fullmatch(r"(.*?),?:(\d+),?", host)
    return (f"{m.group(1)},:{m.group(2)}" if m else host) + paren + rest


def _as_is(url, **_options):  # noqa: ANN001, ANN202 - the surt package's canonicalizer hook
    return url


def surt_prefix(rule: str) -> str:
    """A scope rule as a SURT prefix of :func:`url_surt`'s form (see the module docstring)."""
    text = rule.strip()
    if text.lower().startswith(("http://(", "https://(")):
        text = text.split("(", 1)[1]  # Heritrix's form: the scheme is not compared
    elif "://" in text:
        url = canonicalize(text)
        if url is None:
            raise UserError(f"scope SURT rule {rule!r}: not a valid URL")
        parts = urlsplit(url)
        if parts.path == "/" and not parts.query:
            host = url_surt(url).split(")", 1)[0]  # the host and its subdomains; on a port: that host
            return host + ")" if ":" in host else host
        return url_surt(url)
    host, paren, path = _port_last(text).partition(")")
    host = host.lower()
    if not re.fullmatch(r"[a-z0-9\-_]+(,[a-z0-9\-_]+)*,?(:\d+)?", host):
        raise UserError(f"scope SURT rule {rule!r}: expected a SURT prefix such as 'org,example,' or "
                        "'org,example,www)/docs/', or a URL")
    if paren and not host.endswith(",") and ":" not in host:
        host += ","  # the CDX form 'org,example)/a' in url_surt's form
    if ":" in host:
        paren = ")"  # ':808' must not be a prefix of ':8080'
    return host + paren + path


def compile_regexes(rules: Sequence[str], setting: str) -> list[re.Pattern[str]]:
    out = []
    for rule in rules:
        try:
            out.append(re.compile(rule))
        except re.error as exc:
            raise UserError(f"{setting}: {rule!r} is not a regular expression ({exc})") from None
    return out


class CompiledRules(NamedTuple):
    allow: list[re.Pattern[str]]
    deny: list[re.Pattern[str]]
    allow_surts: tuple[str, ...]
    deny_surts: tuple[str, ...]


def compile_rules(allow: Sequence[str], deny: Sequence[str], allow_surts: Sequence[str],
                  deny_surts: Sequence[str]) -> CompiledRules:
    """The four settings' rules, compiled; :class:`UserError` names the first rule that is not a
    regular expression or a SURT (settings validation calls this too)."""
    return CompiledRules(compile_regexes(allow, "scope_allow"), compile_regexes(deny, "scope_deny"),
                         tuple(surt_prefix(r) for r in allow_surts), tuple(surt_prefix(r) for r in deny_surts))
