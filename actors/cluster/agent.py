"""One crawling agent: its loop and its lifecycle.

The loop is BUbiNG's glue: drain finished visits from the fetch actors and carry them out
(:mod:`actors.visit.batch_commit`: parse, duplicates, decision, store, route links, commit), let the
distributor move URLs from the sieve and the virtual queues to the workbench, export metrics, and
end when the whole crawl is idle or the budget is spent. The agent's actors are its crew
(:mod:`actors.cluster.crew`), its links go through the link router (:mod:`actors.frontier.link_router`), and the
driver (:mod:`actors.cluster.driver`) starts Ray and Redis around it.

Several agents (``agents`` setting, one per Ray node as in BUbiNG/UbiCrawler) have no leader: each
owns the shards the membership gives it, has its own view of the Redis workbench, and pauses while
the driver moves shards (:mod:`actors.cluster.membership`). The crawl ends when every agent saw itself idle
at the same value of the crawl's activity counter (:mod:`actors.cluster.termination`). docs/architecture.md
has the path of one URL and the crash semantics.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from raycrawl import metrics
from raycrawl.actors.cluster.crew import Crew
from raycrawl.actors.cluster.operator_inbox import OperatorInbox
from raycrawl.actors.cluster.periodic import queue_revisits
from raycrawl.actors.cluster.termination import Termination
from raycrawl.actors.frontier.distributor import Distributor
from raycrawl.actors.frontier.link_router import LinkRouter
from raycrawl.actors.frontier.virtualizer import Virtualizer
from raycrawl.actors.frontier.workbench import Workbench
from raycrawl.actors.visit.batch_commit import BatchCommitter
from raycrawl.actors.visit.chain import build_stages, stage_classes
from raycrawl.actors.visit.duplicates import ShardedDuplicates, ask_actors
from raycrawl.actors.visit.visit_stage import StageContext, Stages
from raycrawl.errors import UserError
from raycrawl.policies.assignment import SHARDS, apply_shards
from raycrawl.policies.focus import FocusPolicy
from raycrawl.policies.front_queues import DEFAULT_BIAS
from raycrawl.policies.networks import NetworkPolicy
from raycrawl.policies.politeness import Politeness
from raycrawl.progress import Progress
from raycrawl.redis_server import connect, lost
from raycrawl.report import build_report, write_report
from raycrawl.seeds import read_seeds
from raycrawl.settings import Settings
from raycrawl.stops import storage_failure
from raycrawl.storage import crawl_timeline
from raycrawl.storage.crawl_dir import begin, layout, read_crawl_id
from raycrawl.storage.operator_control import control_view

log = logging.getLogger(__name__)

METRICS_INTERVAL = 2.0  # s between exports of the frontier gauges (a Redis round trip and a sieve call)
AGENT0 = "agent0"


class Agent:
    """Runs one crawl to the end (frontier empty or budget spent). ``run()`` returns the report."""

    def __init__(self, settings: Settings, redis_url: str, progress: Progress | None = None,
                 name: str = AGENT0, shards: dict[int, str] | None = None, budget: int | None = None) -> None:
        """``name``: this agent; ``shards``: shard → agent for every agent of the crawl (None: this
        one owns all); ``budget``: this agent's share of the page budget (None: all of ``max_pages``)."""
        s = self.s = settings
        self.out, self.redis_url, self.name, self.progress = Path(settings.out), redis_url, name, progress
        self.share, self.share_base = budget, 0  # the budget share, and pages done when it was set
        self.client = connect(redis_url)
        self.wb = Workbench(self.client, s.redis_prefix, Politeness.of(s), view=name)
        self.f = self.wb.frontier
        self.virt = Virtualizer(layout(self.out).virtualizer, self.f, s.workbench_urls_per_host, s.agent_dir is not None)
        self.focus = FocusPolicy.load(s.focus) if s.focus else None
        levels, bias = (self.focus.levels, self.focus.bias) if self.focus else (1, DEFAULT_BIAS)
        self.distributor = Distributor(self.wb, self.virt, front_size=s.front_size, max_front_size=s.max_front_size,
                                       max_urls_per_host=s.max_urls_per_host, batch=s.batch * 4,
                                       allows=NetworkPolicy(s.allow_networks).allows, levels=levels, bias=bias,
                                       focused=self.focus is not None)
        stage_classes(s)  # (a bad ``stages`` or ``extra_stages`` fails here, before any actor starts)
        self.stages: Stages | None = None  # the crawl-time stages, built with the crew (start)
        self.router = LinkRouter(name, s.redis_prefix, shards or dict.fromkeys(range(SHARDS), name))
        self.distributor.shards = self.router.my_shards
        self.standalone = shards is None  # not one of several agents under actors/cluster/membership.py
        self.crew: Crew | None = None
        self.committer: BatchCommitter | None = None
        self.next_budget: int | None = None
        # Membership changes: pause, new shards, resume. ``finished``: no pause will be honoured.
        self.pause_requested, self.paused = threading.Event(), threading.Event()
        self.resumed, self.finished = threading.Event(), threading.Event()
        self.stop_requested = threading.Event()  # Ctrl-C, SIGTERM: stop at the next batch boundary
        self.termination = Termination(self.f, name)
        # The operator's commands (raycrawl ctl): stop, seeds; the lead agent writes operator.log.
        self.inbox = OperatorInbox(control_view(self.f), layout(self.out).operator_log if name == AGENT0 else None)
        self.redis_run_id: str | None = None
        self.epoch = self.f.epoch()  # a periodic crawl's pass (actors/cluster/periodic.py); 0: the first crawl
        self.proxy_failures_seen = 0  # the fetch actors' proxy_failures counted in Redis so far

    def _count_proxy_failures(self, statuses: list[dict]) -> None:
        """The requests a proxy failed (put back, never recorded against a site) in the crawl's
        counters, for the report: the fetch actors' counts since the last round (a restarted actor
        counts from 0 again)."""
        now = sum(st.get("proxy_failures", 0) for st in statuses)
        if now > self.proxy_failures_seen:
            self.f.commit([], {"proxy_failures": now - self.proxy_failures_seen})
        self.proxy_failures_seen = now

    @property
    def run_pages(self) -> int:
        return self.committer.pages if self.committer else 0

    def start(self, replay: list[int] = ()) -> None:
        """Start the agent's crew and offer it the seeds of its hosts. ``replay``: shards brought from
        a dead holder's checkpoint, whose logs the sieve applies first (storage/shard_handoff.py)."""
        import ray

        s = self.s
        metrics.bind_crawl(read_crawl_id(self.out))
        seeds = [u for u in read_seeds(s.seeds) if self.router.owner(u) == self.name] if s.seeds else []
        if self.share is None and s.max_pages:  # (a periodic crawl's pass has a budget of its own)
            self.share = max(0, s.max_pages - self.f.pass_pages())
        self.crew = Crew(s, self.redis_url, self.name, self.share)
        if replay:  # before anything else reaches those shards: their queues must be what Redis's offsets say
            ray.get(self.crew.sieve.take.remote([], list(replay)))
        duplicates = ShardedDuplicates(ask_actors(self.router, self.crew.sieve))
        several = s.agents > 1 or s.elastic  # (agents may join an elastic crawl later)
        self.stages = build_stages(s, StageContext(self.f, duplicates, self.epoch, agent=self.name,
                                                   owner=self.router.owner if several else None))
        seeds = [u for u in seeds if self.stages.judge(u, (urlsplit(u).hostname or "").lower()) is None]
        self.committer = BatchCommitter(self.f, self.crew, self.router, self.stages)
        self.redis_run_id = self.client.info("server")["run_id"]
        if self.epoch:
            queue_revisits(self.out, self.epoch, self.crew.sieve, lambda u: self.router.owner(u) == self.name)
        if seeds:  # a focused crawl starts from its top level
            ray.get(self.crew.sieve.enqueue.remote(seeds, [self.focus.seed_level if self.focus else 0] * len(seeds)))

    # --- the loop ------------------------------------------------------------------------------------
    def run(self, prepare: bool = True) -> dict[str, Any]:
        """Crawl until the frontier of the whole crawl is empty or this agent's budget is spent;
        returns the report (of the whole crawl so far). ``prepare``: clear or recover the Redis
        state first (False when the caller did it for all agents)."""
        if prepare:
            begin(self.out, self.f, self.s)
            apply_shards(self.f, self.router.shards)
        if self.crew is None:
            self.start()
        started, stopped = time.time(), "interrupted"
        try:
            stopped = self._loop()
        finally:
            elapsed = time.time() - started
            self._shutdown()
            if not lost(self.redis_url):
                self._sample()
            self.finished.set()
            report = build_report(self.f.stats(), elapsed=elapsed, run_pages=self.run_pages, stopped=stopped,
                                  frontier=self.f.counts(), extra={"required_front": self.distributor.required_front,
                                                                   "pass": self.epoch})
            try:  # (one of several agents: the driver writes the crawl's report)
                if self.standalone:
                    write_report(layout(self.out).report, report)
            except OSError as exc:  # a full disk: the report is in Redis's counters too
                log.warning("report.json not written: %s", exc.strerror or exc)
        return report

    def _loop(self) -> str:
        import ray

        crew, committer = self.crew, self.committer
        read_sieve = lambda offs, n, levels, bias: ray.get(crew.sieve.read_front.remote(offs, n, levels, bias))  # noqa: E731
        resolve = lambda names: ray.get(crew.fetchers[0].resolve_many.remote(names))  # noqa: E731
        t0 = next_metrics = time.time()
        while True:
            if self.stop_requested.is_set():
                return "interrupted"
            if self.inbox.stop_requested():
                return "stopped"
            if self.pause_requested.is_set():
                self._hold()
                continue
            try:
                outcomes, statuses = crew.drain(self.s.batch)
            except ray.exceptions.RayActorError as exc:
                self._recover_fetchers(exc)
                continue
            outcomes += self.stages.outcomes()  # (a page's render)
            if outcomes:
                committer.process(outcomes)
            else:
                committer.finish()
            if any(st["waited"] for st in statuses):
                self.distributor.fetchers_waited()
            self._count_proxy_failures(statuses)
            budget_spent = self.s.max_pages and all(st["budget"] is not None and st["budget"] <= 0 for st in statuses)
            res = None
            if not budget_spent and not self.stages.holds_back():  # (renders queued up: fetch what is in hand)
                try:  # (a step changes Redis only at its end, after resolving)
                    res = self.distributor.step(read_sieve, resolve)
                except ray.exceptions.RayActorError as exc:
                    self._recover_fetchers(exc)
                    continue
                if res.failed:
                    committer.record_failures(res.failed)
                if res.over_host_limit or res.spilled:
                    self.f.commit([], {"filtered:max-urls-per-host": res.over_host_limit, "virtualized": res.spilled})
            crew.pace(bool(outcomes) or (res is not None and res.moved), statuses)
            self.inbox.poll(self.stages.judge, lambda urls: self.router.deliver(crew.sieve, urls))
            if time.time() >= next_metrics:
                next_metrics = time.time() + METRICS_INTERVAL
                if committer.deferred:  # a peer that was silent may answer again (LinkRouter.ask_peers)
                    committer.retry_deferred()
                if orphans := self.f.claim_failing(self.s.batch):  # a dead agent's, or a crashed run's
                    committer.record_failures(orphans, budgeted=False)
                run_id = self.client.info("server")["run_id"]
                if run_id != self.redis_run_id:
                    # Redis restarted: an acquire whose reply was lost left hosts busy for no fetcher.
                    self._recover_fetchers("Redis restarted")
                    self.redis_run_id = run_id
                    continue
                counts = self.f.counts()
                metrics.record_frontier(self.name, counts, self.run_pages / max(1e-9, time.time() - t0),
                                        ray.get(crew.sieve.stats.remote()).get("seen"))
                self._sample(counts)
            if self.progress is not None and self.progress.due():
                self.progress.show_crawl(self.f.counts(), self.f.stats(), statuses, self.run_pages / max(1e-9, time.time() - t0))
            # (a batch still to be committed counts: a render's links — its outcome is no fetch, so
            # nothing of it is in Redis's in-flight set — are delivered by that commit; idle before
            # it, one agent of several ended, and the links it then got were never fetched)
            idle = all(st["idle"] for st in statuses) and not self.stages.busy() and committer.written is None
            if idle and committer.held:  # (without a shared OUT) its batches wait for the object store
                committer.ship(force=budget_spent or self.f.front_size() == 0)
            if idle and budget_spent:
                committer.finish()
                committer.ship(force=True)
                self.termination.done()
                return "budget spent"
            if idle and self.termination.all_idle(self.router.agents, lambda: ray.get(
                    crew.sieve.exhausted.remote(self.f.sieve_offsets(self.distributor.queues)))):
                return "budget spent" if self.termination.budget_ended else "frontier empty"

    def _sample(self, counts: dict[str, int] | None = None) -> None:
        """One row of the crawl timeline (storage/crawl_timeline.py); a full disk only loses it."""
        try:
            crawl_timeline.record(layout(self.out).timeline, self.name, self.f.stats(), counts or self.f.counts())
        except OSError as exc:
            log.debug("timeline sample not written: %s", exc)

    def _recover_fetchers(self, why: object) -> None:
        """A fetch actor died (Ray restarts it with an empty loop), or Redis restarted. Stop the
        fetchers and commit their results, put the in-flight URLs of this agent's view back
        (:meth:`Workbench.recover_view`), then start every fetch actor again with what is left of
        the agent's budget. What a dead one had fetched but not handed over is fetched again —
        the only pages a fetcher's death costs twice."""
        log.warning("agent %s: %s; recovering in-flight URLs", self.name, why)
        self._stop_fetching()
        requeued = self.wb.recover_view(time.time())
        self.f.commit([], {"recovered": requeued})
        log.warning("agent %s: %d in-flight URLs put back", self.name, requeued)
        left = None if self.share is None else max(0, self.share - (self.run_pages - self.share_base))
        self.crew.start_fetchers(self._take_share(left))

    def _take_share(self, budget: int | None) -> int | None:
        self.share, self.share_base = budget, self.run_pages  # this agent's share from now on
        return budget

    def _stop_fetching(self) -> None:
        rest = self.crew.stop_fetching()
        if rest:
            self.committer.process(rest)
        self.committer.finish()
        self.committer.ship(force=True)

    # --- membership changes (called from the driver's thread while the loop runs) -------------------
    def request_pause(self) -> bool:
        """Ask the loop to stop fetching, commit everything and wait; True once it does, False if
        the loop ended instead."""
        self.pause_requested.set()
        while not self.paused.wait(0.1):
            if self.finished.is_set():
                return False
        return True

    def resume(self, shards: dict[int, str], budget: int | None) -> None:
        """Continue with a new shard map (gained shards already taken by the sieve) and budget
        share. An agent whose loop has not run yet (it just joined) only takes them on."""
        self.router.set_shards(shards)
        self.distributor.shards = self.router.my_shards
        self.next_budget = budget
        if self.paused.is_set():
            self.resumed.set()
        elif self.s.max_pages:
            self.crew.set_budget(self._take_share(budget))

    def _hold(self) -> None:
        self._stop_fetching()
        self.paused.set()
        self.resumed.wait()
        self.resumed.clear()
        self.paused.clear()
        self.pause_requested.clear()
        if self.stop_requested.is_set():  # (the crawl stops while this agent was paused)
            return
        self.committer.retry_deferred()
        self.crew.start_fetchers(self._take_share(self.next_budget if self.s.max_pages else None))

    def _shutdown(self) -> None:
        try:
            if lost(self.redis_url):
                # Nothing can be committed: what the fetchers hold stays in the in-flight set (--resume).
                log.warning("agent %s: Redis is gone; stopping without committing the visits in flight", self.name)
            elif self.crew is not None:
                self._stop_fetching()
                if self.stages is not None:  # while every agent's sieve actor still runs (close() ends them)
                    self.stages.finish()
        except Exception as exc:  # noqa: BLE001 - report what we have; the in-flight set covers the rest
            if isinstance(exc, UserError) or storage_failure(exc) is not None:  # said once, by the caller
                log.warning("agent shutdown incomplete: %s", getattr(exc, "cause", None) or exc)
            else:
                log.exception("agent shutdown incomplete")
        if self.standalone:
            self.close()

    def close(self) -> None:
        """End the crew. With several agents, only once every agent has stopped: until then others
        may still send links to this agent's sieve."""
        if self.stages is not None:  # (the near-duplicate representatives were written at the run's end)
            self.stages.close()
        if self.crew is not None:
            self.crew.close()

