"""The crawl's filters as a stage: which links are followed, which responses parsed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import StageContext, VisitStage
from raycrawl.exchange import FetchResult
from raycrawl.policies.filters import build_postfetch, build_prefetch

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class Scope(VisitStage):
    """The crawl's filters (policies/filters.py): which links are followed (prefetch) and which
    responses are parsed (postfetch)."""

    name = "scope"

    def __init__(self, settings: Settings) -> None:
        self.prefetch, self.postfetch = build_prefetch(settings), build_postfetch(settings)
        self.stylesheets = settings.page_requisites  # parsed for their url()s and @imports
        self.requisite_hops = settings.requisite_hops

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Scope:
        return cls(settings)

    def parses(self, fr: FetchResult) -> bool:
        return bool(self.postfetch(fr)) or (self.stylesheets and fr.ctype == "text/css")

    def judge(self, url: str, host: str) -> str | None:
        return self.prefetch.explain(url)

    # What only says where the crawl goes (allow rules, host suffixes): a requisite may leave it.
    _OUT_OF_SCOPE = frozenset({"scope-allow", "host-suffix"})

    def judge_requisite(self, url: str, host: str, parent: str, sheet: bool) -> str | None:
        """Heritrix's transclusion hops: a requisite of an in-scope page or stylesheet is fetched
        wherever it is (hop 1: a CDN); with ``requisite_hops`` 2 so is a ``url()`` of such an
        out-of-scope stylesheet (hop 2: its font, its images) — but not its ``@import``s, which
        could chain on without end. Deny rules, schemes, extensions, length and depth still hold."""
        why = self.prefetch.explain(url)
        if why not in self._OUT_OF_SCOPE or self.requisite_hops < 1:
            return why
        if self.prefetch.explain(parent) is None:
            return None
        return None if self.requisite_hops >= 2 and not sheet else why


STAGE = Scope
