"""The operator's live rules (``raycrawl ctl``) as a stage: links, queued URLs, pauses, delays."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import FetchHooks, StageContext, VisitStage
from raycrawl.storage.operator_control import control_view

if TYPE_CHECKING:
    from raycrawl.settings import Settings
    from raycrawl.storage.redis_frontier import RedisFrontier


class OperatorRules(VisitStage):
    """The operator's live rules (``raycrawl ctl``: storage/operator_control.py): links to blocked
    hosts and out of the operator's scope are not followed, and the fetch actors drop queued URLs
    of blocked hosts, out of scope or past their host's budget (recorded with that error)."""

    name = "operator"

    def __init__(self, view) -> None:  # noqa: ANN001 - a ControlView
        self.view = view

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> OperatorRules | None:
        return None if ctx.frontier is None else cls(control_view(ctx.frontier))

    @classmethod
    def fetch_hooks(cls, settings: Settings, frontier: RedisFrontier | None) -> FetchHooks | None:
        """The fetch actors pause when told, give a throttled server its delay, skip a blocked
        robots.txt, and drop queued URLs blocked, out of scope or past their server's budget."""
        if frontier is None:
            return None
        view = control_view(frontier)

        def refuse(url: str, server: str) -> str | None:
            policy = view.current()
            if (why := policy.refuse(url, server)) is not None:
                return why
            budget = policy.budget(server)
            if budget is not None and view.control.spend(server) > budget:
                return "budget"
            return None

        return FetchHooks(refuse=refuse, refuse_robots=lambda url, server: view.current().blocked(url, server),
                          paused=lambda: view.current().paused, delay=lambda server: view.current().delay(server))

    def judge(self, url: str, host: str) -> str | None:
        return self.view.current().refuse(url, host)


STAGE = OperatorRules
