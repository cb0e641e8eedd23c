"""A focused crawl as a stage: the links of a page get the level of its score."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import PageVisit, StageContext, VisitStage

if TYPE_CHECKING:
    from raycrawl.settings import Settings


class Focus(VisitStage):
    """A focused crawl (policies/focus.py): the links of a page get the level of its score."""

    name = "focus"

    def __init__(self, policy) -> None:  # noqa: ANN001 - a FocusPolicy
        self.policy = policy

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Focus | None:
        from raycrawl.policies.focus import FocusPolicy

        return cls(FocusPolicy.load(settings.focus)) if settings.focus else None

    def observe(self, visit: PageVisit) -> None:
        pr = visit.parsed
        if pr is not None and pr.score is not None:
            visit.link_level = self.policy.link_level(pr.score)
            visit.counters["focus:scored"] += 1
            visit.counters["focus:relevant"] += pr.score >= 0.5  # the live harvest, as the classifier judges


STAGE = Focus
