"""The summary spill as a stage: which pages' summaries are written with their records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import PageVisit, StageContext, VisitStage
from raycrawl.storage.crawl_pages import is_page

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class Summaries(VisitStage):
    """``summaries_at_crawl``: the pages a post-crawl build reads from the WARC
    (storage/crawl_pages.py: whole 200 HTML responses, not duplicates) have their summaries spilled
    with the write, from the tokens the parsing worker kept. Runs after the duplicate stages."""

    name = "summaries"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Summaries | None:
        return cls() if settings.summaries_at_crawl else None

    def observe(self, visit: PageVisit) -> None:
        fr = visit.fr
        visit.summarise = is_page(fr.url, fr.status, fr.ctype, fr.truncated, visit.record.dup_of is not None)


STAGE = Summaries
