"""Crawl-time stages: the features that look at each finished visit and at each link found.

A stage is a :class:`VisitStage` built once per agent from Settings (:meth:`VisitStage.build`;
None when its setting is off). The batch decision (actors/visit/visit_batch.py) and the committer
(actors/visit/batch_commit.py) loop over the crawl's stages instead of knowing them by name; the fetch
actors build each stage's :meth:`~VisitStage.fetch_hooks` (a queued URL refused, a pause, a server's
delay). The built-in stages are in actors/visit/stages/, one module each; which run, and in which
order, is the chain's table (actors/visit/chain.py), which the ``stages`` setting changes: a stage
of one's own is ``module:Class=POSITION`` there and needs no edit anywhere else
(docs/architecture.md, "Add a crawl-time stage").

The hooks, in the order a batch meets them:

1. :meth:`~VisitStage.parses` — whether a fetched response is parsed at all;
   :meth:`~VisitStage.parser_work` — what runs in the parser's process on the batch's results
   (a focused crawl's scores, the near-duplicate fingerprints);
2. :meth:`~VisitStage.find` — what the stage finds in the batch before the decision (the
   duplicates: exact ones, then near ones), in ``Findings``;
3. :meth:`~VisitStage.robots` — the links a robots.txt answer yields (sitemaps);
4. :meth:`~VisitStage.observe` — each page visit, in order; may set its revisit, its links'
   level, its link record's fields and count in the batch's counters;
5. :meth:`~VisitStage.judge` — each link and redirect target, in order: a reason not to follow it;
6. :meth:`~VisitStage.settle` — after the batch's decision, to publish what the stage learned;
   :meth:`~VisitStage.outcomes` — visits of the stage's own making (a page's render) for the next
   batch, :meth:`~VisitStage.busy` — the crawl is not idle while a stage has work under way —
   and :meth:`~VisitStage.holds_back` — the agent takes no new URLs while a stage cannot keep up;
7. :meth:`~VisitStage.finish` — when the agent's run ends (its crew still running);
8. :meth:`~VisitStage.close` — when the agent's crew ends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raycrawl.exchange import FetchResult, VisitKind
from raycrawl.storage.capture import Capture
from raycrawl.storage.link_records import LinkRecord
from raycrawl.storage.warc import Revisit

if TYPE_CHECKING:
    from raycrawl.actors.visit.parser import ParseResult
    from raycrawl.actors.visit.renderer import Rendered
    from raycrawl.settings import Settings
    from raycrawl.storage.redis_frontier import RedisFrontier



@dataclass
class Outcome:
    """A finished visit: ``key`` is the in-flight key (server and visit-state entry) to commit;
    ``kind`` what it was; ``level`` the priority level the URL was queued with (a focused crawl's
    front queue)."""

    key: str
    kind: VisitKind
    fr: FetchResult
    attempts: int = 1
    level: int = 0
    prior: Capture | None = None
    """A revisited page's last capture: the fetch was a conditional GET, and an unchanged answer
    is a WARC revisit of that capture."""
    render: RenderRound | None = None
    """A render of the page (``kind`` RENDER): what the browser made of it."""


@dataclass
class RenderRound:
    """One render of a page (actors/visit/stages/render.py): what the browser made of it, what it
    asked for that the archive lacked and the crawl has not tried yet (``asks``: fetched as the
    page's requisites, then the page is rendered again), and whether this is its last render
    (``final``: its DOM and links are stored)."""

    rendered: Rendered
    asks: list[str]
    final: bool
    round: int
    summarise: bool = False
    """The final render's text goes to the summaries (``summaries_at_crawl``) in place of the markup's."""


@dataclass
class StageContext:
    """What a stage may be built with besides Settings: the shared frontier, the crawl's duplicate
    stores (actors/visit/duplicates.py) and the pass of a periodic crawl."""

    frontier: RedisFrontier
    duplicates: Any = None
    epoch: int = 0
    agent: str = "agent0"
    owner: Callable[[str], str] | None = None
    """Which agent owns a URL's host (the link router's), when the crawl may have more than one."""


@dataclass
class PageVisit:
    """One page visit while its batch is decided: what the stages read and may change."""

    outcome: Outcome
    parsed: ParseResult | None
    record: LinkRecord
    counters: Counter[str]
    link_level: int = 0
    """The priority level of the links found in the page."""
    revisit: Revisit | None = None
    """The capture its response is a WARC revisit of (None: a full response record)."""
    summarise: bool = False
    """Its summary is spilled with its records (the summaries stage says so)."""

    @property
    def fr(self) -> FetchResult:
        return self.outcome.fr


@dataclass
class Findings:
    """A batch's parse results and duplicates, gathered before the decision."""

    parsed: dict[str, ParseResult] = field(default_factory=dict)
    dup_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    """URL → (representative URL, "exact" or "near")."""
    revisit_of: dict[str, Revisit] = field(default_factory=dict)
    """URL → the earlier capture of a byte-identical payload (exact duplicates only)."""
    sha1s: dict[str, str] = field(default_factory=dict)
    """URL → payload digest, for every answer with a body."""
    parsed_urls: list[str] = field(default_factory=list)
    """The pages parsed, in the order of the parser's batch."""
    fetched: dict[str, FetchResult] = field(default_factory=dict)
    """URL → exchange, for every page parsed."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Stage name → what its :meth:`VisitStage.parser_work` made of the batch in the parser."""
    rendered: dict[str, ParseResult] = field(default_factory=dict)
    """URL → the parse of its rendered DOM, for the batch's final renders."""


@dataclass
class FetchHooks:
    """A stage's say in the fetch actors, each part optional: ``refuse`` (URL, server name) → why a
    queued URL is not fetched any more (an error kind its link record gets); ``refuse_robots``
    (robots.txt URL, server name) → not fetched; ``paused`` → acquire nothing now; ``delay`` server
    name → a host delay that replaces the crawl's (None: the crawl's)."""

    refuse: Callable[[str, str], str | None] | None = None
    refuse_robots: Callable[[str, str], bool] | None = None
    paused: Callable[[], bool] | None = None
    delay: Callable[[str], float | None] | None = None


class VisitStage:
    """A crawl-time feature. Every hook is optional (the defaults do nothing)."""

    name = "stage"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> VisitStage | None:
        """The stage this crawl runs, or None when its settings leave it off."""
        return cls()

    @classmethod
    def fetch_hooks(cls, settings: Settings, frontier: RedisFrontier | None) -> FetchHooks | None:
        """What the stage asks of the fetch actors (built in each fetch actor's process), or None."""
        return None

    def parses(self, fr: FetchResult) -> bool:
        return True

    def parser_work(self) -> Callable[[list[ParseResult]], Any] | None:
        """Work to run in the parser's process over each batch's parse results (a picklable
        callable: it travels with each batch): it may set fields of the results (a focused crawl's
        scores), and what it returns reaches :meth:`find` as ``findings.extras[self.name]``."""
        return None

    def find(self, findings: Findings) -> None:
        pass

    def robots(self, fr: FetchResult, counters: Counter[str]) -> list[str]:
        return []

    def observe(self, visit: PageVisit) -> None:
        pass

    def judge(self, url: str, host: str) -> str | None:
        return None

    def judge_requisite(self, url: str, host: str, parent: str, sheet: bool) -> str | None:
        """As :meth:`judge`, for a page requisite of ``parent`` (``sheet``: a stylesheet, which
        may have requisites of its own); a stage that treats requisites apart overrides it."""
        return self.judge(url, host)

    def settle(self) -> None:
        pass

    def outcomes(self) -> list[Outcome]:
        """Visits the stage made of its own (a page's render), carried out with the next batch."""
        return []

    def busy(self) -> bool:
        """Work under way that may still yield outcomes or links: the crawl is not idle while it is."""
        return False

    def holds_back(self) -> bool:
        """The stage cannot keep up (renders queue up): the agent takes no new URLs from its
        frontier until it can, and fetches what it has (requisites waited for among them)."""
        return False

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass


class Stages:
    """The stages of one agent's crawl, in order; what the decision and the committer call."""

    def __init__(self, stages: list[VisitStage]) -> None:
        self.stages = stages

    def parses(self, fr: FetchResult) -> bool:
        return all(st.parses(fr) for st in self.stages)

    def parser_works(self) -> dict[str, Callable[[list[ParseResult]], Any]]:
        return {st.name: work for st in self.stages if (work := st.parser_work()) is not None}

    def find(self, findings: Findings) -> None:
        for st in self.stages:
            st.find(findings)

    def robots(self, fr: FetchResult, counters: Counter[str]) -> list[str]:
        return [u for st in self.stages for u in st.robots(fr, counters)]

    def observe(self, visit: PageVisit) -> None:
        for st in self.stages:
            st.observe(visit)

    def judge(self, url: str, host: str) -> str | None:
        for st in self.stages:
            if (why := st.judge(url, host)) is not None:
                return why
        return None

    def judge_requisite(self, url: str, host: str, parent: str, sheet: bool) -> str | None:
        for st in self.stages:
            if (why := st.judge_requisite(url, host, parent, sheet)) is not None:
                return why
        return None

    def settle(self) -> None:
        for st in self.stages:
            st.settle()

    def outcomes(self) -> list[Outcome]:
        return [o for st in self.stages for o in st.outcomes()]

    def busy(self) -> bool:
        return any(st.busy() for st in self.stages)

    def holds_back(self) -> bool:
        return any(st.holds_back() for st in self.stages)

    def finish(self) -> None:
        for st in self.stages:
            st.finish()

    def close(self) -> None:
        for st in self.stages:
            st.close()


def mark_duplicate(visit: PageVisit, original: str, kind: str, revisit: Revisit | None = None) -> None:
    """``visit`` is a duplicate (``kind``: "exact" or "near") of ``original``: its links and
    requisites are not followed (they are its original's), and its WARC record is a revisit of the
    original's capture when ``revisit`` is given and no stage made it one already."""
    rec = visit.record
    rec.dup_of, rec.dup_kind = original, kind
    rec.links, rec.embeds = [], []
    visit.counters[f"dup:{kind}"] += 1
    if visit.revisit is None and revisit is not None:
        visit.revisit = revisit
        visit.counters["dup:revisit-records"] += 1
