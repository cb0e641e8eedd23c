"""What the operator's overrides (storage/operator_control.py) mean for one URL or one server.

A rule's target is ``host:<name>`` (that server name) or ``surt:<prefix>`` (a SURT prefix of the
URL, core/scope_rules.py). Scope rules are ``re:<regex>`` (searched in the URL) or
``surt:<prefix>``; as with the crawl's own scope, any allow rule limits the crawl to what matches
one, and deny wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from raycrawl.scope_rules import url_surt


@lru_cache(maxsize=65536)
def _server_surt(server: str) -> str:
    return url_surt(f"http://{server}/")


class OperatorPolicy:
    """One reading of the control plane (a ``ControlState``), evaluated."""

    def __init__(self, state) -> None:  # noqa: ANN001 - storage.operator_control.ControlState
        self.paused, self.stop = state.paused, state.stop
        self.blocks = _targets(state.of_kind("block"))
        self.delays = _targets(state.of_kind("throttle"))
        self.budgets = _targets(state.of_kind("budget"))
        self.allow = _scope(state.of_kind("allow"))
        self.deny = _scope(state.of_kind("deny"))
        self.empty = not (self.blocks[0] or self.blocks[1] or self.allow[0] or self.allow[1]
                          or self.deny[0] or self.deny[1] or self.budgets[0] or self.budgets[1])

    def blocked(self, url: str, server: str) -> bool:
        return _match(self.blocks, url, server) is not None

    def refuse(self, url: str, server: str) -> str | None:
        """Why the operator does not want ``url`` fetched (``blocked``, ``operator-scope``), or None."""
        if self.empty:
            return None
        if _match(self.blocks, url, server) is not None:
            return "blocked"
        if self.deny[0] or self.deny[1] or self.allow[0] or self.allow[1]:
            surt = url_surt(url)
            if _scope_match(self.deny, url, surt) or (
                    (self.allow[0] or self.allow[1]) and not _scope_match(self.allow, url, surt)):
                return "operator-scope"
        return None

    def delay(self, server: str) -> float | None:
        """The operator's host delay for ``server`` (the most specific rule), or None."""
        return _value(self.delays, server)

    def budget(self, server: str) -> int | None:
        return _value(self.budgets, server)


def _targets(rules: dict[str, dict]) -> Targets:
    """(server name → value, [(SURT prefix, value)] longest first)."""
    hosts = {t[5:]: r["value"] for t, r in rules.items() if t.startswith("host:")}
    surts = sorted(((t[5:], r["value"]) for t, r in rules.items() if t.startswith("surt:")), key=lambda x: -len(x[0]))
    return hosts, surts


Targets = tuple[dict[str, object], list[tuple[str, object]]]


def _lookup(targets: Targets, server: str, surt: Callable[[], str]):  # noqa: ANN202 - the rule's value
    """The value of the rule for ``server`` by name, else of the longest SURT prefix of
    ``surt()`` (computed only when there are SURT rules), else None."""
    hosts, surts = targets
    if server in hosts:
        return hosts[server]
    if surts:
        key = surt()
        return next((v for prefix, v in surts if key.startswith(prefix)), None)
    return None


def _match(targets: Targets, url: str, server: str) -> object | None:
    return _lookup(targets, server, lambda: url_surt(url))


def _value(targets: Targets, server: str):  # noqa: ANN202
    return _lookup(targets, server, lambda: _server_surt(server))


def _scope(rules: dict[str, dict]) -> tuple[list[re.Pattern[str]], list[str]]:
    regexes = [re.compile(t[3:]) for t in rules if t.startswith("re:")]
    return regexes, [t[5:] for t in rules if t.startswith("surt:")]


def _scope_match(rules: tuple[list[re.Pattern[str]], list[str]], url: str, surt: str) -> bool:
    regexes, prefixes = rules
    return any(r.search(url) for r in regexes) or any(surt.startswith(p) for p in prefixes)
