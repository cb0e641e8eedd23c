"""A focused crawl as a stage: the links of a page get the level of its score."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import PageVisit, StageContext, VisitStage

if TYPE_CHECKING:
    from raycrawl.settings import Settings


@lru_cache(maxsize=4)
def _policy(path: str):  # noqa: ANN202 - a FocusPolicy, loaded once per parser process
    from raycrawl.policies.focus import FocusPolicy

    return FocusPolicy.load(path)


def score_pages(results: list, focus) -> None:  # noqa: ANN001 - ParseResults, a FocusPolicy
    """A focused crawl's classifier score of each page, from the term counts of its visible text —
    the counts its summary holds (actors.visit.summary_writer.document_counts), which is what
    ``raycrawl simulate`` scored the same page by. Sitemaps get none (their links keep their level)."""
    from raycrawl.actors.visit.parser import words_of
    from raycrawl.actors.visit.summary_writer import counts_of_tokens

    for r in results:
        if not r.sitemap:
            r.score = focus.score_counts(counts_of_tokens(words_of(r))[1])


@dataclass(frozen=True)
class Scorer:
    """The parser-side half (it travels with each batch): scores the pages where their tokens are."""

    path: str

    def __call__(self, results: list) -> None:
        score_pages(results, _policy(self.path))


class Focus(VisitStage):
    """A focused crawl (policies/focus.py): the parser scores each page with the classifier, and
    the links of a page get the level of its score."""

    name = "focus"

    def __init__(self, policy, path: str | None = None) -> None:  # noqa: ANN001 - a FocusPolicy
        self.policy, self.path = policy, path

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Focus | None:
        from raycrawl.policies.focus import FocusPolicy

        return cls(FocusPolicy.load(settings.focus), settings.focus) if settings.focus else None

    def parser_work(self) -> Scorer | None:
        return None if self.path is None else Scorer(self.path)

    def observe(self, visit: PageVisit) -> None:
        pr = visit.parsed
        if pr is not None and pr.score is not None:
            visit.link_level = self.policy.link_level(pr.score)
            visit.counters["focus:scored"] += 1
            visit.counters["focus:relevant"] += pr.score >= 0.5  # the live harvest, as the classifier judges


STAGE = Focus
