"""The stage chain: which crawl-time stages run, in which order — a table, not code.

:data:`BUILT_IN` names each built-in stage with its position and where it is; the ``stages``
setting changes the table (Scrapy's ordered middleware tables): ``NAME=POSITION`` moves a stage,
``NAME=off`` switches it off, ``module:Class=POSITION`` adds a stage of one's own (a
:class:`~actors.visit.visit_stage.VisitStage`). The stages run by ascending position, each hook in
that order. ``raycrawl settings`` prints the chain in force. ``extra_stages`` (the older form)
appends stages after every other.

A new built-in stage is one module in actors/visit/stages/ and one line of :data:`BUILT_IN`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import FetchHooks, StageContext, Stages, VisitStage
from raycrawl.errors import UserError

if TYPE_CHECKING:
    from raycrawl.settings import Settings
    from raycrawl.storage.redis_frontier import RedisFrontier

_HERE = "raycrawl.actors.visit.stages"
BUILT_IN: dict[str, tuple[int, str]] = {  # name → (position, module:Class)
    "scope": (100, f"{_HERE}.scope:Scope"),
    "operator": (200, f"{_HERE}.operator_rules:OperatorRules"),
    "revisits": (300, f"{_HERE}.revisits:Revisits"),
    "dedup-index": (400, f"{_HERE}.earlier_collections:EarlierCollections"),
    "requisites": (500, f"{_HERE}.requisites:PageRequisites"),
    "focus": (600, f"{_HERE}.focus:Focus"),
    "spam": (700, f"{_HERE}.spam_gate:SpamGateStage"),
    "sitemaps": (800, f"{_HERE}.sitemaps:Sitemaps"),
    "exact-dup": (850, f"{_HERE}.exact_duplicates:ExactDuplicates"),
    "near-dup": (900, f"{_HERE}.near_duplicates:NearDuplicates"),
    "summaries": (950, f"{_HERE}.summaries:Summaries"),
    # Last: it judges a requisite only once every other stage let it through (it awaits what will be fetched).
    "render": (990, f"{_HERE}.render:Render"),
}
EXTRA_AT = 10_000  # where ``extra_stages`` go: after every stage of the table


@dataclass(frozen=True)
class Link:
    """One stage of the chain: its name, position and ``module:Class``."""

    name: str
    position: int
    path: str


def chain(settings: Settings) -> list[Link]:
    """The stages in force, in order (UserError for a ``stages`` entry that names nothing)."""
    table = dict(BUILT_IN)
    for i, path in enumerate(settings.extra_stages or ()):
        table[path] = (EXTRA_AT + i, path)
    for item in settings.stages or ():
        name, sep, value = item.strip().rpartition("=")
        if not sep or not name:
            raise UserError(f"stages: {item!r}: expected NAME=POSITION, NAME=off or module:Class=POSITION")
        if name not in table and ":" not in name:
            raise UserError(f"stages: no stage {name!r} (built-in: {', '.join(BUILT_IN)}; a stage of one's own "
                            "is module:Class=POSITION)")
        if value.strip().lower() in ("off", "none", "false"):
            table.pop(name, None)
            continue
        try:
            position = int(value)
        except ValueError:
            raise UserError(f"stages: {item!r}: the position must be a whole number, or off") from None
        table[name] = (position, table[name][1] if name in table else name)
    return sorted((Link(n, pos, path) for n, (pos, path) in table.items()), key=lambda k: (k.position, k.name))


def load_stage(path: str) -> type[VisitStage]:
    """The stage class ``module:Class`` names."""
    module, _, name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UserError(f"stages: cannot load {path!r} ({exc})") from exc
    if not (isinstance(cls, type) and issubclass(cls, VisitStage)):
        raise UserError(f"stages: {path!r} is not a VisitStage")
    return cls


def stage_classes(settings: Settings) -> list[type[VisitStage]]:
    return [load_stage(link.path) for link in chain(settings)]


def build_stages(settings: Settings, ctx: StageContext) -> Stages:
    """The stages of one agent's crawl, in the chain's order (those their settings leave off are not built)."""
    return Stages([st for c in stage_classes(settings) if (st := c.build(settings, ctx)) is not None])


def fetch_hooks(settings: Settings, frontier: RedisFrontier | None) -> FetchHooks:
    """What the chain's stages ask of a fetch actor, as one set of hooks: a queued URL is refused by
    the first stage that refuses it; paused if any stage says so; a server's delay from the first
    stage that sets one."""
    hooks = [h for c in stage_classes(settings) if (h := c.fetch_hooks(settings, frontier)) is not None]
    refuse = [h.refuse for h in hooks if h.refuse]
    robots = [h.refuse_robots for h in hooks if h.refuse_robots]
    paused = [h.paused for h in hooks if h.paused]
    delays = [h.delay for h in hooks if h.delay]

    def first_refusal(url: str, server: str) -> str | None:
        return next((why for check in refuse if (why := check(url, server)) is not None), None)

    def first_delay(server: str) -> float | None:
        return next((d for delay in delays if (d := delay(server)) is not None), None)

    return FetchHooks(refuse=first_refusal if refuse else None,
                      refuse_robots=(lambda url, server: any(r(url, server) for r in robots)) if robots else None,
                      paused=(lambda: any(p() for p in paused)) if paused else None,
                      delay=first_delay if delays else None)
