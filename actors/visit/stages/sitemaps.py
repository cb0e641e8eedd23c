"""``follow_sitemaps`` as a stage: a robots.txt's ``Sitemap:`` lines are links."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import StageContext, VisitStage
from raycrawl.exchange import FetchResult
from raycrawl.policies.robots import sitemaps_of
from raycrawl.urls import canonicalize

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class Sitemaps(VisitStage):
    """``follow_sitemaps``: the ``Sitemap:`` lines of each robots.txt fetched are links to follow
    (sitemaps themselves are always read when linked)."""

    name = "sitemaps"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Sitemaps | None:
        return cls() if settings.follow_sitemaps else None

    def robots(self, fr: FetchResult, counters: Counter[str]) -> list[str]:
        if not 200 <= fr.status < 300:
            return []
        found = [u for raw in sitemaps_of(fr.body) if (u := canonicalize(raw, fr.url))]
        counters["sitemaps"] += len(found)
        return found


STAGE = Sitemaps
