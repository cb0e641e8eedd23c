"""The built-in crawl-time stages (actors/visit/visit_stage.py): scope, revisits, focus, spam gate,
sitemaps and near-duplicates, in the order they see each visit and each link."""

from __future__ import annotations

import importlib
import time
import weakref
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from raycrawl.actors.visit.visit_stage import Findings, PageVisit, Revisit, StageContext, Stages, VisitStage
from raycrawl.errors import UserError
from raycrawl.exchange import FetchResult
from raycrawl.policies.filters import build_postfetch, build_prefetch
from raycrawl.policies.robots import sitemaps_of
from raycrawl.urls import canonicalize

if TYPE_CHECKING:
    from raycrawl.settings import Settings
    from raycrawl.storage.crawl_epochs import Capture
    from raycrawl.storage.redis_frontier import RedisFrontier


class Scope(VisitStage):
    """The crawl's filters (policies/filters.py): which links are followed (prefetch) and which
    responses are parsed (postfetch)."""

    name = "scope"

    def __init__(self, settings: Settings) -> None:
        self.prefetch, self.postfetch = build_prefetch(settings), build_postfetch(settings)
        self.stylesheets = settings.page_requisites  # parsed for their url()s and @imports
        self.requisite_hops = settings.requisite_hops

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Scope:
        return cls(settings)

    def parses(self, fr: FetchResult) -> bool:
        return bool(self.postfetch(fr)) or (self.stylesheets and fr.ctype == "text/css")

    def judge(self, url: str, host: str) -> str | None:
        return self.prefetch.explain(url)

    # What only says where the crawl goes (allow rules, host suffixes): a requisite may leave it.
    _OUT_OF_SCOPE = frozenset({"scope-allow", "host-suffix"})

    def judge_requisite(self, url: str, host: str, parent: str, sheet: bool) -> str | None:
        """Heritrix's transclusion hops: a requisite of an in-scope page or stylesheet is fetched
        wherever it is (hop 1: a CDN); with ``requisite_hops`` 2 so is a ``url()`` of such an
        out-of-scope stylesheet (hop 2: its font, its images) — but not its ``@import``s, which
        could chain on without end. Deny rules, schemes, extensions, length and depth still hold."""
        why = self.prefetch.explain(url)
        if why not in self._OUT_OF_SCOPE or self.requisite_hops < 1:
            return why
        if self.prefetch.explain(parent) is None:
            return None
        return None if self.requisite_hops >= 2 and not sheet else why


def unchanged(fr: FetchResult, prior: Capture | None, sha1: str | None) -> Revisit | None:
    """The WARC revisit a revisited page's answer is (storage/crawl_epochs.py), or None: a 304 to
    our conditional GET → (captured URL, its date, None: profile server-not-modified); a whole 200
    whose payload SHA-1 is the last capture's → (URL, date, digest: identical-payload-digest).
    ``prior``: the page's last capture when the fetch was a revisit; ``sha1``: the payload digest
    of ``fr.body``."""
    if prior is None:
        return None
    if fr.status == 304:
        return prior.url, prior.date, None
    if fr.status == 200 and not fr.truncated and not fr.error and sha1 == prior.sha1:
        return prior.url, prior.date, prior.sha1
    return None


class Revisits(VisitStage):
    """A periodic crawl's pass (actors/cluster/periodic.py): records are tagged with it, and a revisited
    page that did not change is a WARC revisit of its last capture."""

    name = "revisits"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Revisits:
        return cls(ctx.epoch)

    def observe(self, visit: PageVisit) -> None:
        visit.record.epoch = self.epoch
        prior = visit.outcome.prior
        if prior is None:
            return
        visit.revisit = unchanged(visit.fr, prior, visit.record.sha1)
        if visit.revisit is None:
            visit.counters["revisit:changed"] += 1
        else:
            visit.counters["revisit:not-modified" if visit.revisit[2] is None else "revisit:identical"] += 1


class PageRequisites(VisitStage):
    """``page_requisites``: what a page (or a stylesheet) needs to be shown is followed as its links
    are, and recorded as the record's ``embeds`` (core/requisites.py)."""

    name = "requisites"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> PageRequisites | None:
        return cls() if settings.page_requisites else None

    def observe(self, visit: PageVisit) -> None:
        if visit.parsed is not None:
            visit.record.embeds = visit.parsed.embeds


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
            visit.revisit = (hit[0], hit[1], sha1)
            visit.counters["dedup-index:revisits"] += 1

    def close(self) -> None:
        self.index.close()


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


def spam_gate_on(settings: Settings) -> bool:
    return bool(settings.spam_gate)


SPAM_REFRESH = 0.5
"""Seconds between a fetch actor's reads of the hosts the spam gate blocked."""


class SpamGateStage(VisitStage):
    """The crawl-time spam gate (policies/spam_gate.py): observes every HTML page, drops the links
    to the hosts it blocked, and publishes new blocks so that every fetch actor skips their queued
    URLs (``P spamblocked``; a resume keeps them)."""

    name = "spam"

    def __init__(self, gate, frontier: RedisFrontier | None) -> None:  # noqa: ANN001 - a SpamGate
        """``frontier``: where blocks are read from and published (None: kept to this stage)."""
        self.gate, self.frontier = gate, frontier
        if frontier is not None:  # what it blocked before a resume, or another agent's gate
            gate.blocked.update(frontier.spam_blocked())
        self.published = len(gate.blocked)

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> SpamGateStage | None:
        from raycrawl.policies.spam_gate import gate_for

        gate = gate_for(settings)
        return None if gate is None else cls(gate, ctx.frontier)

    @classmethod
    def dequeue_check(cls, settings: Settings, frontier: RedisFrontier) -> Callable[[str, str], str | None] | None:
        if not spam_gate_on(settings):
            return None
        blocked: set[str] = set()
        checked = [0.0]

        def check(url: str, host: str) -> str | None:
            if time.monotonic() - checked[0] > SPAM_REFRESH:
                blocked.clear()
                blocked.update(frontier.spam_blocked())
                checked[0] = time.monotonic()
            return "spam" if host in blocked else None

        return check

    def observe(self, visit: PageVisit) -> None:
        if visit.parsed is not None and visit.fr.ctype == "text/html":
            host = (urlsplit(visit.record.url).hostname or "").lower()
            if self.gate.observe(host, self.gate.page_features(visit.fr.body, host)):
                visit.counters["spam:gated_pages"] += 1

    def judge(self, url: str, host: str) -> str | None:
        return "spam" if self.gate.is_blocked(host) else None

    def settle(self) -> None:
        if len(self.gate.blocked) > self.published and self.frontier is not None:
            self.frontier.block_spam_hosts(dict(list(self.gate.blocked.items())[self.published:]))
            self.published = len(self.gate.blocked)


class Sitemaps(VisitStage):
    """``follow_sitemaps``: the ``Sitemap:`` lines of each robots.txt fetched are links to follow
    (sitemaps themselves are always read when linked)."""

    name = "sitemaps"

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Sitemaps | None:
        return cls() if settings.follow_sitemaps else None

    def robots(self, fr: FetchResult, counters: Counter[str]) -> list[str]:
        if not 200 <= fr.status < 300:
            return []
        found = [u for raw in sitemaps_of(fr.body) if (u := canonicalize(raw, fr.url))]
        counters["sitemaps"] += len(found)
        return found


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
    def dequeue_check(cls, settings: Settings, frontier: RedisFrontier) -> Callable[[str, str], str | None] | None:
        if frontier is None:
            return None
        view = control_view(frontier)

        def check(url: str, server: str) -> str | None:
            policy = view.current()
            if (why := policy.refuse(url, server)) is not None:
                return why
            budget = policy.budget(server)
            if budget is not None and view.control.spend(server) > budget:
                return "budget"
            return None

        return check

    def judge(self, url: str, host: str) -> str | None:
        return self.view.current().refuse(url, host)


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def control_view(frontier: RedisFrontier):  # noqa: ANN201 - a ControlView
    """The process's view of the control plane of ``frontier``'s crawl: one per frontier, so that
    the fetch loop and the operator stage's checks (or the agent's stage and its inbox) share one
    cache and one version read per second."""
    from raycrawl.storage.operator_control import Control, ControlView

    if frontier not in _VIEWS:
        _VIEWS[frontier] = ControlView(Control(frontier.r, frontier.p))
    return _VIEWS[frontier]


BUILT_IN: list[type[VisitStage]] = [Scope, OperatorRules, Revisits, EarlierCollections, PageRequisites, Focus, SpamGateStage, Sitemaps, NearDuplicates]
"""The built-in stages, in the order they see each visit and each link."""


def load_stage(path: str) -> type[VisitStage]:
    """The stage class ``module:Class`` names (the ``extra_stages`` setting)."""
    module, _, name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UserError(f"extra_stages: cannot load {path!r} ({exc})") from exc
    if not (isinstance(cls, type) and issubclass(cls, VisitStage)):
        raise UserError(f"extra_stages: {path!r} is not a VisitStage")
    return cls


def stage_classes(settings: Settings) -> list[type[VisitStage]]:
    return [*BUILT_IN, *(load_stage(p) for p in settings.extra_stages or ())]


def build_stages(settings: Settings, ctx: StageContext) -> Stages:
    """The stages of one agent's crawl, built-in and extra, in order."""
    return Stages([st for c in stage_classes(settings) if (st := c.build(settings, ctx)) is not None])


def dequeue_checks(settings: Settings, frontier: RedisFrontier) -> list[Callable[[str, str], str | None]]:
    """The checks a fetch actor runs on each queued URL before fetching it."""
    return [c for cls in stage_classes(settings) if (c := cls.dequeue_check(settings, frontier)) is not None]
