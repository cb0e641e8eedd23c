"""The crawl-time spam gate as a stage."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from raycrawl.actors.visit.visit_stage import FetchHooks, PageVisit, StageContext, VisitStage

if TYPE_CHECKING:
    from raycrawl.settings import Settings
    from raycrawl.storage.redis_frontier import RedisFrontier


def spam_gate_on(settings: Settings) -> bool:
    return bool(settings.spam_gate)


SPAM_REFRESH = 0.5
"""Seconds between a fetch actor's reads of the hosts the spam gate blocked."""


class SpamGateStage(VisitStage):
    """The crawl-time spam gate (policies/spam_gate.py): observes every HTML page, drops the links
    to the hosts it blocked, and publishes new blocks so that every fetch actor skips their queued
    URLs (``P spamblocked``; a resume keeps them)."""

    name = "spam"

    def __init__(self, gate, frontier: RedisFrontier | None) -> None:  # noqa: ANN001 - a SpamGate
        """``frontier``: where blocks are read from and published (None: kept to this stage)."""
        self.gate, self.frontier = gate, frontier
        if frontier is not None:  # what it blocked before a resume, or another agent's gate
            gate.blocked.update(frontier.spam_blocked())
        self.published = len(gate.blocked)

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> SpamGateStage | None:
        from raycrawl.policies.spam_gate import gate_for

        gate = gate_for(settings)
        return None if gate is None else cls(gate, ctx.frontier)

    @classmethod
    def fetch_hooks(cls, settings: Settings, frontier: RedisFrontier | None) -> FetchHooks | None:
        """The fetch actors skip queued URLs of the hosts blocked (read every SPAM_REFRESH s)."""
        if not spam_gate_on(settings):
            return None
        blocked: set[str] = set()
        checked = [0.0]

        def refuse(url: str, host: str) -> str | None:
            if time.monotonic() - checked[0] > SPAM_REFRESH:
                blocked.clear()
                blocked.update(frontier.spam_blocked())
                checked[0] = time.monotonic()
            return "spam" if host in blocked else None

        return FetchHooks(refuse=refuse)

    def observe(self, visit: PageVisit) -> None:
        if visit.parsed is not None and visit.fr.ctype == "text/html":
            host = (urlsplit(visit.record.url).hostname or "").lower()
            if self.gate.observe(host, self.gate.page_features(visit.fr.body, host)):
                visit.counters["spam:gated_pages"] += 1

    def judge(self, url: str, host: str) -> str | None:
        return "spam" if self.gate.is_blocked(host) else None

    def settle(self) -> None:
        if len(self.gate.blocked) > self.published and self.frontier is not None:
            self.frontier.block_spam_hosts(dict(list(self.gate.blocked.items())[self.published:]))
            self.published = len(self.gate.blocked)


STAGE = SpamGateStage
