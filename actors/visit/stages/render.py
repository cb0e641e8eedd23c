"""Rendering as a stage: pages whose content scripts make are rendered in headless Chromium, and
every request the browser makes goes through the crawl (issue 52).

The browser has no network of its own (actors/visit/renderer.py): each of its requests is answered
from what the crawl archived. A page the ``render`` setting picks (policies/render_policy.py) waits
until its requisites — which the crawl fetches as it fetches every requisite: robots.txt, scope,
operator rules, host and IP politeness, the allowed networks, the WARC — have been archived, then
it is rendered in the agent's render actor (actors/visit/render_actor.py). What the render asked for
and the archive lacked (a ``fetch()`` call, a lazy image, a script's script) is queued as the page's
requisites through the same judges; once they are archived the page is rendered again, until it
asks for nothing new or ``render_rounds`` is reached. The last render's DOM is stored (a WARC
``resource`` record ``urn:dom:URL``), its links are followed, and its record (links and title of
the rendered DOM, the requests it made) goes to the crawl's ``rendered/`` records.

The stage runs last in the chain (its judge of a requisite sees only what every other stage let
through: that is what will be fetched). Its responses come from the visits it observes: a
requisite of a waiting page is kept for it when its visit is carried out; responses are also kept
in a cache bounded by ``render_cache_mb`` (a site's scripts and stylesheets, which every page asks
for and the crawl fetches once). A requisite on a host another agent owns is asked of that
agent, which hands its response over (actors/visit/render_handover.py). A requisite that never
comes back (the sieve had seen it and the cache no longer holds it) is waited for until
``render_wait`` seconds pass with none of the page's requisites coming — seconds in which the crawl was taking new URLs — then
the page is rendered with what there is. When
pages ready to render queue up (the browser is the bottleneck: a render costs ~100 times a fetch's
CPU), the agent takes no new URLs from its frontier until they are rendered (:meth:`Render.holds_back`). Waiting pages live in the agent's memory: an agent that dies
loses their renders (their pages are archived as fetched).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raycrawl.actors.visit.render_handover import Handover
from raycrawl.actors.visit.renderer import Rendered, Resource
from raycrawl.actors.visit.visit_stage import Outcome, PageVisit, RenderRound, StageContext, VisitStage
from raycrawl.exchange import FetchResult, VisitKind
from raycrawl.policies.render_policy import RenderPolicy

if TYPE_CHECKING:
    from raycrawl.settings import Settings

log = logging.getLogger(__name__)

HTML = ("text/html", "application/xhtml+xml")
HOP_BY_HOP = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})


def resource_of(fr: FetchResult) -> Resource:
    """What the archive answers the browser for ``fr``: its status, headers (the body is decoded,
    so no encoding or length of the wire's) and body."""
    return Resource(fr.status, {k: v for k, v in fr.headers.items() if k not in HOP_BY_HOP}, fr.body)


class ResourceCache:
    """Recently archived responses, least recently used first out, bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.bytes = max_bytes, 0
        self.items: OrderedDict[str, Resource] = OrderedDict()

    def get(self, url: str) -> Resource | None:
        found = self.items.get(url)
        if found is not None:
            self.items.move_to_end(url)
        return found

    def put(self, url: str, res: Resource) -> None:
        if len(res.body) > self.max_bytes // 8:
            return
        old = self.items.pop(url, None)
        if old is not None:
            self.bytes -= len(old.body)
        self.items[url] = res
        self.bytes += len(res.body)
        while self.bytes > self.max_bytes:
            _, gone = self.items.popitem(last=False)
            self.bytes -= len(gone.body)


@dataclass
class Waiting:
    """A page to render: the responses it will be answered with, what it still waits for."""

    url: str
    level: int
    resources: dict[str, Resource]
    since: float
    """When it last had news of its requisites (the stage's clock: seconds the crawl took new URLs)."""
    round: int = 1
    awaited: set[str] = field(default_factory=set)
    tried: set[str] = field(default_factory=set)
    """What its earlier renders asked for (fetched, or tried)."""
    ref: Any = None
    """The render under way (a Ray ObjectRef), if any."""


class Render(VisitStage):
    """``render``: pages rendered in a browser whose every request goes through the crawl (module doc)."""

    name = "render"

    def __init__(self, settings: Settings) -> None:
        self.policy = RenderPolicy.parse(settings.render)
        self.settings = settings
        self.rounds, self.wait, self.backlog = settings.render_rounds, settings.render_wait, settings.render_backlog
        self.cache = ResourceCache(settings.render_cache_mb << 20)
        self.waiting: dict[str, Waiting] = {}
        self.waiters: dict[str, set[str]] = {}  # requisite URL → pages waiting for it
        self.ready: deque[str] = deque()
        self.again: list[str] = []  # pages rendered again once the batch carrying their asks is decided
        self.rendering: dict[Any, tuple[str, int]] = {}  # ObjectRef → (page, render actor)
        self.actors: list[Any] = []  # render actors, started on first need
        self.load: dict[int, int] = {}  # renders under way by actor (its index)
        self.slots = settings.render_browsers * settings.render_tabs
        self.next_sweep = 0.0
        # The seconds the crawl was taking new URLs: a page's wait for its requisites is counted in
        # them (while the crawl holds back for the browsers, its requisites cannot come either).
        self.clock, self.ticked, self.held = 0.0, time.monotonic(), False
        self.handover: Handover | None = None  # requisites other agents fetch (several agents)

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Render | None:
        if settings.render == "never":
            return None
        stage = cls(settings)
        if ctx.owner is not None:
            stage.handover = Handover(ctx.frontier, ctx.agent, ctx.owner)
        return stage

    # --- what the crawl fetched ----------------------------------------------------------------
    def observe(self, visit: PageVisit) -> None:
        fr = visit.fr
        res = resource_of(fr) if fr.status > 0 else None
        if res is not None:
            self.cache.put(fr.url, res)
            if self.handover is not None:
                self.handover.fetched(fr.url, res)
        self._arrived(fr.url, res)
        # (a duplicate too: the routes of one application serve the very same shell, and its scripts
        # make each route's page from the URL)
        if visit.parsed is None or fr.ctype not in HTML or not 200 <= fr.status < 300 or fr.url in self.waiting:
            return
        why = self.policy.wants(fr.url, fr.body)
        if why is None:
            return
        if len(self.waiting) >= self.backlog:
            visit.counters["render:backlog"] += 1
            return
        visit.counters[f"render:{why}"] += 1
        self.waiting[fr.url] = Waiting(fr.url, visit.record.level, {fr.url: res}, self.clock)
        self.ready.append(fr.url)  # (rendered once its requisites, judged next, have come)

    def _arrived(self, url: str, res: Resource | None) -> None:
        """``url`` was fetched (``res``: its response; None: it failed): the pages waiting for it."""
        for page in self.waiters.pop(url, ()):
            w = self.waiting.get(page)
            if w is not None:
                if res is not None:
                    w.resources[url] = res
                w.awaited.discard(url)
                w.since = self.clock  # (it waits for what does not come, not for a slow crawl)
                if not w.awaited and w.ref is None:
                    self.ready.append(page)

    def judge_requisite(self, url: str, host: str, parent: str, sheet: bool) -> str | None:
        w = self.waiting.get(parent)
        if w is not None and w.ref is None and url not in w.resources:
            found = self.cache.get(url)
            if found is not None:
                w.resources[url] = found
            else:
                w.awaited.add(url)
                if url not in self.waiters and self.handover is not None:
                    self.handover.ask(url)  # (its host may be another agent's)
                self.waiters.setdefault(url, set()).add(parent)
        return None

    def settle(self) -> None:
        self.ready.extend(self.again)
        self.again.clear()

    # --- renders --------------------------------------------------------------------------------
    def _actor(self) -> int:
        """The render actor with the fewest renders under way (each browser its own process)."""
        if not self.actors:
            import ray

            from raycrawl.actors.visit import render_actor

            here = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False)
            cls = render_actor.actor_class().options(scheduling_strategy=here)
            self.actors = [cls.remote(self.settings) for _ in range(self.settings.render_browsers)]
        return min(range(len(self.actors)), key=lambda i: self.load.get(i, 0))

    def outcomes(self) -> list[Outcome]:
        """The renders that ended (as visits to carry out), after handing the render actor the
        pages that are ready."""
        out = self._collect()
        now = time.monotonic()
        if not self.held:
            self.clock += now - self.ticked
        self.ticked = now
        if now >= self.next_sweep:  # pages whose requisites did not all come: rendered with what did
            self.next_sweep = now + 1.0
            if self.handover is not None:
                for url, res in self.handover.exchange(self.cache.get):
                    self.cache.put(url, res)
                    self._arrived(url, res)
            for w in self.waiting.values():
                if w.awaited and w.ref is None and self.clock - w.since >= self.wait:
                    self._forget_awaited(w)
                    self.ready.append(w.url)
        # Only pages ready now stay in line (a page whose requisites were judged since it was put in
        # line waits for them; a page may be in line twice).
        self.ready = deque(u for u in dict.fromkeys(self.ready)
                           if (w := self.waiting.get(u)) is not None and not w.awaited and w.ref is None)
        while self.ready and len(self.rendering) < 2 * self.slots:  # (one waits behind each tab)
            w = self.waiting[self.ready.popleft()]
            i = self._actor()
            w.ref = self.actors[i].render.remote(w.url, w.resources)
            self.rendering[w.ref] = (w.url, i)
            self.load[i] = self.load.get(i, 0) + 1
        # Renders queue up: the crawl holds back and the pages' clock stops (their requisites cannot
        # come either; rendering what is ready ends it). A backlog nearly full holds the crawl back
        # with the clock running: what waits for requisites that do not come is rendered in time.
        self.held = len(self.ready) >= 4 * self.slots
        return out

    def _collect(self) -> list[Outcome]:
        import ray

        if not self.rendering:
            return []
        done, _ = ray.wait(list(self.rendering), num_returns=len(self.rendering), timeout=0)
        out = []
        for ref in done:
            page, i = self.rendering.pop(ref)
            self.load[i] -= 1
            w = self.waiting[page]
            w.ref = None
            try:
                r: Rendered = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the render actor died with the page: recorded, not fatal
                log.warning("render of %s failed: %r", page, exc)
                r = Rendered(page, error="crashed")
            asks = [u for u in dict.fromkeys(r.missing) if u not in w.tried and u not in w.resources
                    and u.startswith(("http://", "https://"))]
            final = not asks or w.round >= self.rounds or r.error is not None
            if final:
                self._forget_awaited(w)
                del self.waiting[page]
            else:
                w.round += 1
                w.tried.update(asks)
                w.since = self.clock
                self.again.append(page)  # (ready once its asks, judged with this outcome, are awaited)
            now = time.time()
            fr = FetchResult(url=page, ip="", status=200, ctype="text/html", body=r.dom.encode("utf-8", "replace"),
                             started=now - r.seconds, ended=now)
            out.append(Outcome("", VisitKind.RENDER, fr, level=w.level,
                               render=RenderRound(r, [] if final else asks, final, w.round,
                                                  summarise=self.settings.summaries_at_crawl)))
        return out

    def _forget_awaited(self, w: Waiting) -> None:
        for url in w.awaited:
            pages = self.waiters.get(url)
            if pages is not None:
                pages.discard(w.url)
                if not pages:
                    del self.waiters[url]
        w.awaited.clear()

    def busy(self) -> bool:
        return bool(self.waiting)

    def holds_back(self) -> bool:
        """More pages ready (their requisites in) than the browser renders in a few rounds, or the
        backlog nearly full: the crawl takes no new URLs meanwhile (what it has in hand, requisites
        among them, it fetches)."""
        return self.held or len(self.waiting) >= self.backlog * 3 // 4

    def close(self) -> None:
        if not self.actors:
            return
        import ray

        closing = [actor.close.remote() for actor in self.actors]
        for actor, ref in zip(self.actors, closing, strict=True):
            try:
                ray.get(ref, timeout=30)
            except Exception as exc:  # noqa: BLE001 - its browser goes with the kill
                log.warning("a render actor did not close cleanly: %r", exc)
            ray.kill(actor)
        self.actors = []


STAGE = Render
