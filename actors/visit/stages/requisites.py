"""Page requisites as a stage: what a page needs to be shown is followed and recorded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import PageVisit, StageContext, VisitStage

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class PageRequisites(VisitStage):
    """``page_requisites``: what a page (or a stylesheet) needs to be shown is followed as its links
    are, and recorded as the record's ``embeds`` (core/requisites.py)."""

    name = "requisites"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> PageRequisites | None:
        return cls() if settings.page_requisites else None

    def observe(self, visit: PageVisit) -> None:
        if visit.parsed is not None:
            visit.record.embeds = visit.parsed.embeds


STAGE = PageRequisites
