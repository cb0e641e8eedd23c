"""Filters: composable predicates deciding what is fetched (prefetch, on URLs) and what is kept
(postfetch, on fetch results), as BUbiNG's ``Filter``s are.

A :class:`Filter` is a named predicate; ``a & b``, ``a | b`` and ``~a`` build new ones, and
``explain(x)`` names the leaf filter that rejected ``x`` (for the report's "filtered" counts).

The factories read the filter settings of :class:`raycrawl.settings.Settings` (its "filters"
group, docs/settings.md: schemes, host suffixes, URL length, repeated segments, depth, excluded
extensions, scope rules (core/scope_rules.py), content types) from a Settings, any object with
those attributes, or a mapping; a missing one takes the setting's default.

(The maximum number of URLs per host is counted by the frontier, not here.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from raycrawl.scope_rules import compile_rules, url_surt
from raycrawl.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULTS = Settings()


def setting(settings: Any, name: str) -> Any:
    """``settings.name`` (or ``settings[name]`` for a mapping), else the setting's default."""
    value = settings.get(name) if isinstance(settings, Mapping) else getattr(settings, name, None)
    return getattr(DEFAULTS, name) if value is None else value


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(v.strip() for v in value if v and v.strip())


class Filter(Generic[T]):
    """A named predicate. Subclasses implement ``apply``; combine with ``&``, ``|``, ``~``."""

    name = "filter"

    def apply(self, x: T) -> bool:
        raise NotImplementedError

    def __call__(self, x: T) -> bool:
        return self.apply(x)

    def explain(self, x: T) -> str | None:
        """None if ``x`` is accepted, else the name of a filter that rejected it."""
        return None if self.apply(x) else self.name

    def __and__(self, other: Filter[T]) -> Filter[T]:
        return And(self, other)

    def __or__(self, other: Filter[T]) -> Filter[T]:
        return Or(self, other)

    def __invert__(self) -> Filter[T]:
        return Not(self)

    def __repr__(self) -> str:
        return self.name


class Predicate(Filter[T]):
    """A filter from a plain function."""

    def __init__(self, fn: Callable[[T], bool], name: str) -> None:
        self.fn = fn
        self.name = name

    def apply(self, x: T) -> bool:
        return bool(self.fn(x))


class And(Filter[T]):
    def __init__(self, *parts: Filter[T]) -> None:
        assert parts
        self.parts = [q for p in parts for q in (p.parts if isinstance(p, And) else [p])]
        self.name = "(" + " and ".join(p.name for p in self.parts) + ")"

    def apply(self, x: T) -> bool:
        return all(p.apply(x) for p in self.parts)

    def explain(self, x: T) -> str | None:
        for p in self.parts:
            why = p.explain(x)
            if why is not None:
                return why
        return None


class Or(Filter[T]):
    def __init__(self, *parts: Filter[T]) -> None:
        assert parts
        self.parts = [q for p in parts for q in (p.parts if isinstance(p, Or) else [p])]
        self.name = "(" + " or ".join(p.name for p in self.parts) + ")"

    def apply(self, x: T) -> bool:
        return any(p.apply(x) for p in self.parts)


class Not(Filter[T]):
    def __init__(self, inner: Filter[T], name: str | None = None) -> None:
        self.inner = inner
        self.name = name or f"not {inner.name}"

    def apply(self, x: T) -> bool:
        return not self.inner.apply(x)


class Accept(Filter[Any]):
    name = "true"

    def apply(self, x: Any) -> bool:
        return True


# ---- prefetch filters (on canonical URLs) ---------------------------------------------------


@lru_cache(maxsize=1 << 12)
def _path(url: str) -> str:
    # Memoised: the prefetch filters of one URL split it three times, and urlsplit was 10 % of the
    # agent's CPU (benchmarks/profile_crawl.py, issue 16).
    return urlsplit(url).path


def _path_segments(url: str) -> list[str]:
    return [s for s in _path(url).split("/") if s]


def has_repeated_segments(segments: Sequence[str], times: int) -> bool:
    """True if some run of k ≥ 1 consecutive segments occurs ``times`` times back to back
    (``a/b/a/b/a/b`` has ``a/b`` three times; ``x/x/x`` has ``x`` three times)."""
    n = len(segments)
    if times < 2:
        return times == 1 and n > 0
    for k in range(1, n // times + 1):
        for start in range(0, n - k * times + 1):
            first = segments[start : start + k]
            if all(segments[start + j * k : start + (j + 1) * k] == first for j in range(1, times)):
                return True
    return False


class SchemeIn(Filter[str]):
    def __init__(self, schemes: Sequence[str]) -> None:
        self.schemes = frozenset(s.lower() for s in schemes)
        self.name = "scheme"

    def apply(self, url: str) -> bool:
        return url.split(":", 1)[0].lower() in self.schemes


class HostSuffix(Filter[str]):
    """Host equals a suffix or ends with ``.suffix`` (``example.test`` admits ``www.example.test``)."""

    def __init__(self, suffixes: Sequence[str]) -> None:
        self.suffixes = tuple(s.lower().strip(".") for s in suffixes)
        self.name = "host-suffix"

    def apply(self, url: str) -> bool:
        host = (urlsplit(url).hostname or "").rstrip(".")
        return any(host == s or host.endswith("." + s) for s in self.suffixes)


class MaxURLLength(Filter[str]):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.name = "url-length"

    def apply(self, url: str) -> bool:
        return len(url) <= self.limit


class DuplicateSegmentsLessThan(Filter[str]):
    """BUbiNG's trap filter: rejects paths with a run of segments repeated ``times`` times in a row."""

    def __init__(self, times: int) -> None:
        assert times >= 2
        self.times = times
        self.name = "duplicate-segments"

    def apply(self, url: str) -> bool:
        return not has_repeated_segments(_path_segments(url), self.times)


class MaxDepth(Filter[str]):
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.name = "depth"

    def apply(self, url: str) -> bool:
        return len(_path_segments(url)) <= self.depth


class PathEndsWithOneOf(Filter[str]):
    def __init__(self, extensions: Sequence[str]) -> None:
        self.suffixes = tuple("." + e.lower().lstrip(".") for e in extensions)
        self.name = "extension"

    def apply(self, url: str) -> bool:
        return _path(url).lower().endswith(self.suffixes)


class Scope(Filter[str]):
    """The scope rules as one prefetch filter; :meth:`explain` says ``scope-deny`` or ``scope-allow``."""

    name = "scope"

    def __init__(self, allow: Sequence[str] = (), deny: Sequence[str] = (), allow_surts: Sequence[str] = (),
                 deny_surts: Sequence[str] = ()) -> None:
        self.allow, self.deny, self.allow_surts, self.deny_surts = compile_rules(allow, deny, allow_surts, deny_surts)
        self.needs_surt = bool(self.allow_surts or self.deny_surts)

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny or self.allow_surts or self.deny_surts)

    def explain(self, url: str) -> str | None:
        key = url_surt(url) if self.needs_surt else ""
        if any(p.search(url) for p in self.deny) or (self.deny_surts and key.startswith(self.deny_surts)):
            return "scope-deny"
        if (self.allow or self.allow_surts) and not (
                any(p.search(url) for p in self.allow) or (self.allow_surts and key.startswith(self.allow_surts))):
            return "scope-allow"
        return None

    def apply(self, url: str) -> bool:
        return self.explain(url) is None


def build_prefetch(settings: Any = None) -> Filter[str]:
    """The URL filter of ``settings`` (see the module doc): a callable url → bool with ``explain``."""
    parts: list[Filter[str]] = [SchemeIn(_as_tuple(setting(settings, "allowed_schemes")))]
    suffixes = _as_tuple(setting(settings, "host_suffixes"))
    if suffixes:
        parts.append(HostSuffix(suffixes))
    parts.append(MaxURLLength(int(setting(settings, "max_url_length"))))
    times = int(setting(settings, "max_duplicate_segments"))
    if times >= 2:
        parts.append(DuplicateSegmentsLessThan(times))
    parts.append(MaxDepth(int(setting(settings, "max_depth"))))
    extensions = _as_tuple(setting(settings, "exclude_extensions"))
    if extensions:
        parts.append(Not(PathEndsWithOneOf(extensions), name="extension"))
    rules = (setting(settings, n) for n in ("scope_allow", "scope_deny", "scope_allow_surts", "scope_deny_surts"))
    scope = Scope(*([r] if isinstance(r, str) else list(r or ()) for r in rules))  # (commas are the rules' own)
    if scope:
        parts.append(scope)
    return And(*parts)


# ---- postfetch filters (on FetchResults) ----------------------------------------------------


class ContentTypeIn(Filter[Any]):
    """Media type (``FetchResult.ctype``) in the list; ``type/*`` wildcards; "" per ``accept_missing``."""

    def __init__(self, types: Sequence[str], accept_missing: bool = False) -> None:
        self.exact = frozenset(t.lower() for t in types if not t.endswith("/*"))
        self.prefixes = tuple(t.lower()[:-1] for t in types if t.endswith("/*"))
        self.accept_missing = accept_missing
        self.name = "content-type"

    def apply(self, fr: Any) -> bool:
        ctype = (fr.ctype or "").lower()
        if not ctype:
            return self.accept_missing
        return ctype in self.exact or ctype.startswith(self.prefixes)


def build_postfetch(settings: Any = None) -> Filter[Any]:
    """The FetchResult filter of ``settings``: which fetched pages are parsed (others are
    stored but not parsed)."""
    types = _as_tuple(setting(settings, "allowed_content_types"))
    return ContentTypeIn(types, bool(setting(settings, "accept_missing_content_type")))
