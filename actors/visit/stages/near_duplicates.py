"""``near_dup`` as a stage: pages whose MinHash sketch matches an earlier page's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import Findings, StageContext, VisitStage

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class NearDuplicates(VisitStage):
    """``near_dup``: a page whose MinHash sketch matches an earlier page's (actors/visit/shingler.py)
    is a near-duplicate of it; the index lives in the crawl's duplicate stores."""

    name = "near-dup"

    def __init__(self, index) -> None:  # noqa: ANN001 - a NearDupIndex
        self.index = index
        self.sketch = (index.num_perm, index.k, index.seed)

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> NearDuplicates | None:
        from raycrawl.actors.visit.shingler import near_dup_index

        index = near_dup_index(settings, ctx.duplicates)
        return None if index is None else cls(index)

    def find(self, findings: Findings) -> None:
        if findings.sketches is None:
            return
        parsed, dup_of = findings.parsed, findings.dup_of
        rows = [i for i, url in enumerate(findings.parsed_urls)
                if parsed[url].digest and url not in dup_of and parsed[url].text]
        urls = [findings.parsed_urls[i] for i in rows]
        reps = self.index.check_and_add_sketches(urls, findings.sketches[rows], findings.nonempty[rows])
        for url, rep in zip(urls, reps, strict=True):
            if rep is not None and rep != url:
                dup_of[url] = (rep, "near")

    def finish(self) -> None:
        self.index.flush()

    def close(self) -> None:
        self.index.close()


STAGE = NearDuplicates
