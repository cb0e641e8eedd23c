"""``near_dup`` as a stage: pages whose MinHash sketch matches an earlier page's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import Findings, PageVisit, StageContext, VisitStage, mark_duplicate

if TYPE_CHECKING:
    from raycrawl.settings import Settings


@dataclass(frozen=True)
class Sketcher:
    """The parser-side half (it travels with each batch): MinHash sketches of the parsed pages'
    tokens, made beside the parse to keep them off the agent's serial batch cycle."""

    num_perm: int
    k: int
    seed: int

    def __call__(self, results: list) -> tuple:
        from raycrawl.actors.visit.parser import words_of
        from raycrawl.actors.visit.shingler import sketch_token_lists

        return sketch_token_lists([words_of(r) for r in results], self.num_perm, self.k, self.seed)


class NearDuplicates(VisitStage):
    """``near_dup``: a page whose MinHash sketch matches an earlier page's (actors/visit/shingler.py)
    is a near-duplicate of it; the index lives in the crawl's duplicate stores."""

    name = "near-dup"

    def __init__(self, index) -> None:  # noqa: ANN001 - a NearDupIndex
        self.index = index
        self.found = Findings()

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> NearDuplicates | None:
        from raycrawl.actors.visit.shingler import near_dup_index

        index = near_dup_index(settings, ctx.duplicates)
        return None if index is None else cls(index)

    def parser_work(self) -> Sketcher:
        return Sketcher(self.index.num_perm, self.index.k, self.index.seed)

    def find(self, findings: Findings) -> None:
        self.found = findings
        if self.name not in findings.extras:
            return
        sketches, nonempty = findings.extras[self.name]
        parsed, dup_of = findings.parsed, findings.dup_of
        rows = [i for i, url in enumerate(findings.parsed_urls)
                if parsed[url].digest and url not in dup_of and parsed[url].text]
        urls = [findings.parsed_urls[i] for i in rows]
        reps = self.index.check_and_add_sketches(urls, sketches[rows], nonempty[rows])
        for url, rep in zip(urls, reps, strict=True):
            if rep is not None and rep != url:
                dup_of[url] = (rep, "near")

    def observe(self, visit: PageVisit) -> None:
        dup = self.found.dup_of.get(visit.fr.url)
        if visit.parsed is not None and dup is not None and dup[1] == "near":
            mark_duplicate(visit, dup[0], "near")

    def finish(self) -> None:
        self.index.flush()

    def close(self) -> None:
        self.index.close()


STAGE = NearDuplicates
