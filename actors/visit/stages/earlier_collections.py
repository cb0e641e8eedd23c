"""``--dedup-index`` as a stage: payloads archived in earlier collections are revisits."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import Findings, PageVisit, StageContext, VisitStage
from raycrawl.storage.warc import Revisit

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class EarlierCollections(VisitStage):
    """``--dedup-index``: a whole payload already archived in an earlier collection is a WARC
    revisit of the earliest capture there (storage/dedup_index.py); the writer checks the digest."""

    name = "dedup-index"

    def __init__(self, index) -> None:  # noqa: ANN001 - a DedupIndex
        self.index = index
        self.archived: dict[str, tuple[str, str]] = {}

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> EarlierCollections | None:
        from raycrawl.storage.dedup_index import FILE, DedupIndex

        return cls(DedupIndex(Path(settings.out) / FILE)) if settings.dedup_index else None

    def find(self, findings: Findings) -> None:
        self.archived = self.index.earliest(findings.sha1s.values())  # one query per batch

    def observe(self, visit: PageVisit) -> None:
        fr, sha1 = visit.fr, visit.record.sha1
        if visit.revisit is not None or not sha1 or fr.truncated or fr.status == 304:
            return
        hit = self.archived.get(sha1)
        if hit is not None:
            visit.revisit = Revisit(hit[0], hit[1], sha1)
            visit.counters["dedup-index:revisits"] += 1

    def close(self) -> None:
        self.index.close()


STAGE = EarlierCollections
