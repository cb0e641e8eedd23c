"""One crawling agent: the sieve, fetch, parser and store actors wired around the Redis workbench.

The agent's own loop (in the calling process) is BUbiNG's glue: it drains finished visits from the
fetch actors, has them parsed, decides what each one is (duplicate, redirect, error, page to follow),
stores WARC + link records, offers the followed links (prefetch-filtered) to the sieve, and only
then *commits* the batch in Redis (in-flight entries dropped, counters added, AOF synced). The
distributor then moves URLs from the sieve and the virtual queues to the workbench.

Several agents (``agents`` setting, one per Ray node as in BUbiNG/UbiCrawler): no leader; hosts fall
in shards and each shard belongs to the agent chosen by consistent hashing (:mod:`policies.assignment`).
An agent has its own sieve shards, distributor, fetch, parser and store actors and its own *view* of
the Redis workbench; links to hosts owned elsewhere are batched to the owner's sieve (named actor
``raycrawl-sieve-<agent>``) behind a cache of recently sent URLs. When agents join or leave, the
driver pauses them all, moves shards, and resumes them (:mod:`actors.membership`). Hosts of one IP may belong to several agents: the IP's busy
mark and next-fetch time are global in Redis, so IP politeness holds across agents. The crawl ends
when every agent saw itself idle at the same value of the crawl's activity counter (see
:meth:`Agent._all_idle`).

Crash semantics (kill -9 of everything, then ``--resume``): a visit is committed only after its
records and its links are durable, so after a crash the in-flight set holds exactly the visits
that may have to be redone; :meth:`RedisFrontier.recover` puts them back in front of their visit
states. The sieve offset moves atomically with the URLs it hands to the workbench. Hence no URL is
lost and none is fetched twice, except visits in flight (or drained but uncommitted) at the kill.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from raycrawl import metrics
from raycrawl.actors.distributor import Distributor
from raycrawl.actors.fetch_loop import Outcome
from raycrawl.actors.parser import HTML_TYPES, decode_body
from raycrawl.actors.sieve import RecentSet, fingerprint
from raycrawl.actors.virtualizer import Virtualizer
from raycrawl.actors.visit_batch import decide, exact_duplicates, link_record
from raycrawl.actors.workbench import Workbench
from raycrawl.errors import UserError
from raycrawl.policies.assignment import shard_of
from raycrawl.policies.politeness import Politeness
from raycrawl.progress import Progress
from raycrawl.redis_server import connect
from raycrawl.report import build_report, write_report
from raycrawl.settings import Settings
from raycrawl.stops import storage_failure
from raycrawl.storage.crawl_dir import new_crawl_id
from raycrawl.storage.warc import sha1_b32, warc_date
from raycrawl.urls import canonicalize, split_host

log = logging.getLogger(__name__)


def read_seeds(path: str | Path) -> list[str]:
    """Canonical seed URLs of a seeds file (blank lines and ``#`` comments skipped).
    A file with no valid URL is a UserError."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"seeds file not found: {p}")
    seeds, bad = [], 0
    for line in p.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        url = canonicalize(line)
        if url is None:
            bad += 1
            log.warning("seeds: ignoring %r (not an http(s) URL)", line)
        else:
            seeds.append(url)
    if not seeds:
        raise UserError(f"no valid http(s) URL in seeds file {p}" + (f" ({bad} invalid lines)" if bad else ""))
    return seeds


def _spam_gate(settings: Settings):
    """The crawl-time spam gate (policies/spam_gate.py, docs/spam.md): off unless a ``spam_gate``
    setting or $RAYCRAWL_SPAM_GATE names a gate.json."""
    import os

    path = getattr(settings, "spam_gate", "") or os.environ.get("RAYCRAWL_SPAM_GATE", "")
    if not path:
        return None
    from raycrawl.policies.spam_gate import GateModel, SpamGate

    try:
        return SpamGate(GateModel.load(path))
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _near_dup_index(settings: Settings, redis_url: str):
    """The near-duplicate checker of actors/shingler.py, if that module exists and is enabled."""
    if not settings.near_dup:
        return None
    try:
        from raycrawl.actors.shingler import NearDupIndex
    except ImportError:
        log.info("actors.shingler not available: near-duplicate check skipped")
        return None
    return NearDupIndex(redis_url=redis_url, key_prefix=settings.redis_prefix + "dedup")


# Seconds between exports of the frontier gauges (each costs a Redis round trip and a sieve call).
METRICS_INTERVAL = 2.0
# Recently sent URLs an agent does not send again to another agent's sieve (navigation links).
SENT_CACHE = 100_000


AGENT0 = "agent0"


def sieve_actor_name(prefix: str, agent: str) -> str:
    return f"raycrawl-sieve-{prefix}{agent}"


def split_budget(n: int | None, k: int) -> list[int | None]:
    """``n`` pages over ``k`` shares, as evenly as possible (None: no budget)."""
    return [None if n is None else n // k + (i < n % k) for i in range(k)]


class Agent:
    """Runs one crawl to the end (frontier empty or budget spent). ``run()`` returns the report."""

    def __init__(self, settings: Settings, redis_url: str, progress: Progress | None = None,
                 name: str = AGENT0, shards: dict[int, str] | None = None, budget: int | None = None) -> None:
        """``name``: this agent; ``shards``: shard → agent for every agent of the crawl (None: this
        one owns all); ``budget``: this agent's share of the page budget (None: all of ``max_pages``)."""
        from raycrawl.policies.assignment import SHARDS
        from raycrawl.policies.filters import build_postfetch, build_prefetch
        from raycrawl.policies.networks import NetworkPolicy

        self.s = settings
        self.out = Path(settings.out)
        self.redis_url = redis_url
        self.name = name
        self.share = budget
        self.client = connect(redis_url)
        self.wb = Workbench(self.client, settings.redis_prefix,
                            Politeness(settings.host_delay, settings.ip_delay, settings.max_crawl_delay,
                                       settings.retry_backoff), view=name)
        self.f = self.wb.frontier
        self.virt = Virtualizer(self.out / "virtualizer", self.f, settings.workbench_urls_per_host)
        self.distributor = Distributor(self.wb, self.virt, front_size=settings.front_size,
                                       max_front_size=settings.max_front_size,
                                       max_urls_per_host=settings.max_urls_per_host, batch=settings.batch * 4,
                                       allows=NetworkPolicy(settings.allow_networks).allows)
        self.prefetch = build_prefetch(settings)
        self.postfetch = build_postfetch(settings)
        self.near = _near_dup_index(settings, redis_url)
        self.spam_gate = _spam_gate(settings)
        self.progress = progress
        self.run_pages = 0
        self.agent_name = name  # the metrics' "agent" tag
        self.peers: dict[str, Any] = {}  # other agents' sieve actors
        self.sent = RecentSet(SENT_CACHE)
        # Processed batches not committed yet: (in-flight keys, counters, links, latencies).
        self.deferred: list[tuple[list[str], Counter[str], list[str], list[float]]] = []
        self.standalone = shards is None  # not one of several agents under actors/membership.py
        self._set_shards(shards or dict.fromkeys(range(SHARDS), name))
        self.started = False
        self.share_base = 0  # run_pages when the current budget share was set
        self.next_budget: int | None = None
        # Membership changes (actors/membership.py): the driver asks the loop to pause, changes the
        # shards, resumes it. ``finished``: the loop is over (no pause will ever be honoured).
        self.pause_requested, self.paused = threading.Event(), threading.Event()
        self.resumed, self.finished = threading.Event(), threading.Event()
        self.stop_requested = threading.Event()  # Ctrl-C: stop at the next batch boundary
        self.budget_ended = False  # the crawl ended with other agents' budget shares spent
        self.redis_run_id: str | None = None

    def _set_shards(self, shards: dict[int, str]) -> None:
        self.shards = dict(shards)
        self.agents = sorted(set(self.shards.values()) | {self.name})
        self.my_shards = sorted(s for s, a in self.shards.items() if a == self.name)
        self.distributor.shards = self.my_shards
        self.peers = {}

    # --- setup ---------------------------------------------------------------------------------------
    def _prepare_state(self) -> None:
        if self.s.resume:  # run_crawl verified the state first (verify_resume)
            self.client.delete(self.f.key("idle"))
            requeued = self.wb.recover(time.time())
            log.warning("resuming: %d in-flight URLs put back in their visit states", requeued)
        else:
            if (self.out / "sieve").exists() or self.client.exists(self.f.key("meta")):
                raise UserError(f"{self.out} already holds a crawl: pass --resume to continue it, "
                                "or choose another --out")
            self.f.clear()
            self.client.hset(self.f.key("meta"), mapping={"started": time.time(), "crawl_id": new_crawl_id(self.out),
                                                          "settings": json.dumps(self.s.to_dict())})

    def _start_actors(self) -> None:
        import ray

        from raycrawl.actors import fetch_loop, parser, sieve_shards, store_writer, summary_writer

        s = self.s
        done = self.f.stats().get("pages", 0)
        if self.share is None and s.max_pages:
            self.share = max(0, s.max_pages - done)
        per_actor = split_budget(self.share, s.fetch_actors)
        # An agent's actors run on its node (BUbiNG: an agent is one machine).
        here = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
        self.sieve = sieve_shards.actor_class().options(
            name=sieve_actor_name(s.redis_prefix, self.name), scheduling_strategy=here).remote(
            str(self.out / "sieve"), self.redis_url, s.redis_prefix, self.name, s.sieve_batch, s.url_cache)
        FetchActor = fetch_loop.actor_class()
        self.fetchers = [FetchActor.options(name=f"raycrawl-fetch-{s.redis_prefix}{self.name}-{i}",
                                            scheduling_strategy=here).remote(
                             s, self.redis_url, per_actor[i], self.name)
                         for i in range(s.fetch_actors)]
        self.parser = parser.actor_class().options(
            name=f"raycrawl-parser-{s.redis_prefix}{self.name}", scheduling_strategy=here).remote(s.user_agent)
        self.store = store_writer.actor_class().options(name=f"raycrawl-store-{s.redis_prefix}{self.name}",
                                                 scheduling_strategy=here).remote(
            str(self.out), self.name, s.warc_max_bytes)
        self.summary_writer = None
        if s.summaries_at_crawl:
            self.summary_writer = summary_writer.actor_class().options(
                name=f"raycrawl-summary-{s.redis_prefix}{self.name}", scheduling_strategy=here).remote(
                str(self.out), self.agent_name)
        ray.get([f.start.remote() for f in self.fetchers])
        self.redis_run_id = self.client.info("server")["run_id"]
        self.started = True

    def start(self) -> None:
        """Start the agent's actors and offer it the seeds of its hosts."""
        import ray

        seeds = [u for u in read_seeds(self.s.seeds) if self.prefetch(u)] if self.s.seeds else []
        seeds = [u for u in seeds if self._owner(u) == self.name]
        self._start_actors()
        if seeds:
            ray.get(self.sieve.enqueue.remote(seeds))

    # --- the loop ------------------------------------------------------------------------------------
    def run(self, prepare: bool = True) -> dict[str, Any]:
        """Crawl until the frontier of the whole crawl is empty or this agent's budget is spent;
        returns the report (of the whole crawl so far). ``prepare``: clear or recover the Redis
        state first (False when the caller did it for all agents)."""
        if prepare:
            from raycrawl.policies.assignment import apply_shards

            self._prepare_state()
            apply_shards(self.f, self.shards)
        if not self.started:
            self.start()
        started = time.time()
        stopped = "interrupted"
        try:
            stopped = self._loop()
        finally:
            elapsed = time.time() - started
            self._shutdown()
            self.finished.set()
            report = build_report(self.f.stats(), elapsed=elapsed, run_pages=self.run_pages, stopped=stopped,
                                  frontier=self.f.counts(),
                                  extra={"required_front": self.distributor.required_front})
            try:
                write_report(self.out / "report.json", report)
            except OSError as exc:  # a full disk: the report is in Redis's counters too
                log.warning("report.json not written: %s", exc.strerror or exc)
        return report

    def _loop(self) -> str:
        import ray

        read_sieve = lambda offs, n: ray.get(self.sieve.read.remote(offs, n))  # noqa: E731
        resolve = lambda names: ray.get(self.fetchers[0].resolve_many.remote(names))  # noqa: E731
        t0 = time.time()
        next_metrics = t0
        while True:
            if self.stop_requested.is_set():
                return "interrupted"
            if self.pause_requested.is_set():
                self._hold()
                continue
            outcomes: list[Outcome] = []
            try:
                for batch in ray.get([f.drain.remote(self.s.batch, 0.1) for f in self.fetchers]):
                    outcomes += batch
                statuses = ray.get([f.status.remote() for f in self.fetchers])
            except ray.exceptions.RayActorError as exc:
                self._recover_fetchers(exc)
                continue
            if outcomes:
                self._process(outcomes)
            if any(st["waited"] for st in statuses):
                self.distributor.fetchers_waited()
            budget_spent = self.s.max_pages and all(st["budget"] is not None and st["budget"] <= 0
                                                    for st in statuses)
            if not budget_spent:
                try:  # (a step changes Redis only at its end, after resolving)
                    res = self.distributor.step(read_sieve, resolve)
                except ray.exceptions.RayActorError as exc:
                    self._recover_fetchers(exc)
                    continue
                if res.failed:
                    self._record_failures(res.failed)
                if res.over_host_limit or res.spilled:
                    self.f.commit([], {"filtered:max-urls-per-host": res.over_host_limit, "virtualized": res.spilled})
            idle = all(st["idle"] for st in statuses)
            if time.time() >= next_metrics:
                next_metrics = time.time() + METRICS_INTERVAL
                run_id = self.client.info("server")["run_id"]
                if run_id != self.redis_run_id:
                    # Redis restarted: an acquire whose reply was lost left hosts busy for no fetcher.
                    self._recover_fetchers("Redis restarted")
                    self.redis_run_id = run_id
                    continue
                sieve_size = ray.get(self.sieve.stats.remote()).get("seen")
                metrics.record_frontier(self.agent_name, self.f.counts(),
                                        self.run_pages / max(1e-9, time.time() - t0), sieve_size)
            if self.progress is not None and self.progress.due():
                c = self.f.counts()
                st = self.f.stats()
                el = max(1e-9, time.time() - t0)
                self.progress.show({"pages": st.get("pages", 0), "pages/s": f"{self.run_pages / el:.1f}",
                                    "front": c["front"], "queued": c["queued"], "virtual": c["virtualized"],
                                    "in-flight": sum(x["in_flight"] for x in statuses),
                                    "errors": sum(v for k, v in st.items() if k.startswith("error:"))})
            if idle and budget_spent:
                self.client.hset(self.f.key("idle"), self.name, "done")
                return "budget spent"
            if idle and self._all_idle():
                return "budget spent" if self.budget_ended else "frontier empty"

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
        self._start_fetchers(None if self.share is None else max(0, self.share - (self.run_pages - self.share_base)))

    def _start_fetchers(self, budget: int | None) -> None:
        """(Re)start every fetch actor with an even split of ``budget``, waiting for Ray to have
        restarted the dead ones."""
        import ray

        deadline = time.time() + 120
        for f, b in zip(self.fetchers, self._take_share(budget), strict=True):
            while True:
                try:
                    ray.get([f.set_budget.remote(b), f.start.remote()], timeout=60)
                    break
                except ray.exceptions.RayError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.5)

    def _take_share(self, budget: int | None) -> list[int | None]:
        """Make ``budget`` this agent's share from now on; its split over the fetch actors."""
        self.share, self.share_base = budget, self.run_pages
        return split_budget(budget, len(self.fetchers))

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
        self._set_shards(shards)
        self.next_budget = budget
        if self.paused.is_set():
            self.resumed.set()
        elif self.s.max_pages:
            import ray

            ray.get([f.set_budget.remote(b) for f, b in zip(self.fetchers, self._take_share(budget), strict=True)])

    def _hold(self) -> None:
        self._stop_fetching()
        self.paused.set()
        self.resumed.wait()
        self.resumed.clear()
        self.paused.clear()
        self.pause_requested.clear()
        self._retry_deferred()
        self._start_fetchers(self.next_budget if self.s.max_pages else None)

    def _all_idle(self) -> bool:
        """Distributed termination: this agent has nothing to do (fetchers idle — checked by the
        caller — its sieve exhausted, its view empty) and so has every other agent, all observed at
        the same value of the activity counter. Every commit bumps the counter *after* its links
        are durable in their owners' sieves, so an agent that saw itself idle before links reached
        it holds a stale mark until it looks again, and the crawl cannot end under it. An agent
        whose budget is spent marks itself ``done``."""
        import ray

        act = self.client.get(self.f.key("activity")) or b"0"
        c = self.f.counts(view_only=True)
        mine = (c["virtualized"] == 0 and c["front"] == 0
                and ray.get(self.sieve.exhausted.remote(self.f.sieve_offsets(self.my_shards))))
        if not mine:
            return False
        self.client.hset(self.f.key("idle"), self.name, act)
        marks = self.client.hmget(self.f.key("idle"), self.agents)
        if not all(m == b"done" or m == act for m in marks):
            return False
        # In flight = acquired and not yet committed, also when a fetcher holds the result in its
        # buffer after releasing the host (the caller's idle statuses may be that old).
        c = self.f.counts()
        quiet = c["hosts_busy"] == c["inflight"] == 0 and act == (self.client.get(self.f.key("activity")) or b"0")
        # URLs still queued that belong to agents whose budget share is spent wait for a --resume:
        # everyone else is idle with nothing of its own, so the crawl's budget is spent too.
        self.budget_ended = any(m == b"done" for m in marks)
        return quiet and (self.budget_ended or c["queued"] == c["virtualized"] == 0)

    def _owner(self, url: str) -> str:
        return self.shards[shard_of(split_host(url)[0])] if len(self.agents) > 1 else self.name

    def _deliver(self, urls: list[str], cache: bool = True) -> bool:
        """Offer links to their owners' sieves (ours directly; others' in one batch each, minus the
        URLs sent recently) and wait until they are durable there. False if another agent's sieve
        is gone (that agent died): the caller keeps the batch uncommitted until the membership
        change gives its shards to a live agent (:meth:`_retry_deferred`)."""
        import ray

        if len(self.agents) == 1:
            ray.get(self.sieve.enqueue.remote(urls))
            return True
        by_owner: dict[str, list[str]] = {}
        for url in urls:
            owner = self._owner(url)
            if owner != self.name and cache and self.sent.repeat(fingerprint(url)):
                continue
            by_owner.setdefault(owner, []).append(url)
        mine = self.sieve.enqueue.remote(by_owner.pop(self.name, []))
        try:
            refs = []
            for owner, batch in by_owner.items():
                if owner not in self.peers:
                    self.peers[owner] = ray.get_actor(sieve_actor_name(self.s.redis_prefix, owner))
                refs.append(self.peers[owner].enqueue.remote(batch))
            ray.get(refs)
            delivered = True
        except (ray.exceptions.RayActorError, ValueError) as exc:
            log.warning("agent %s: another agent's sieve is gone (%s); holding the batch", self.name,
                        str(exc).splitlines()[0])
            for url in urls:  # not known to be sent: send again, to the new owners
                self.sent.forget(fingerprint(url))
            delivered = False
        ray.get(mine)
        return delivered

    def _retry_deferred(self) -> None:
        """Batches whose links could not reach a dead agent: send them to the shards' new owners
        and commit them."""
        deferred, self.deferred = self.deferred, []
        for keys, counters, follow, latencies in deferred:
            if self._deliver(follow, cache=False):
                self._commit(keys, counters, latencies)
            else:
                self.deferred.append((keys, counters, follow, latencies))

    def _commit(self, keys: list[str], counters: Counter[str], latencies: list[float]) -> None:
        self.f.commit(keys, counters)
        self.run_pages += counters["pages"]
        metrics.record_batch(self.agent_name, counters, latencies)

    def _record_failures(self, failed: list[tuple[str, str]]) -> None:
        import ray

        if self.s.max_pages:
            # Failures count against the page budget like fetched pages.
            ray.get(self.fetchers[0].consume_budget.remote(len(failed)))
        now = time.time()
        records = [link_record(url, 0, "", now, "", 0, error=kind) for url, kind in failed]
        from raycrawl.exchange import FetchResult

        # Noted first, so that a crash between the records and their commit is seen as in flight
        # by the resume's consistency check (storage/crawl_check.py), not as a Redis that lost writes.
        self.client.hset(self.f.key("failing"), mapping=dict(failed))
        ray.get(self.store.write_batch.remote([(FetchResult(url=r["url"], ip=""), None, r) for r in records]))
        counters = Counter({"pages": len(records), "status:0": len(records)})
        counters.update(f"error:{kind}" for _, kind in failed)
        self.run_pages += len(records)
        self.f.commit([], counters)
        self.client.hdel(self.f.key("failing"), *[url for url, _ in failed])

    def _process(self, outcomes: list[Outcome]) -> None:
        """Parse, classify, store, follow links, commit: one batch of finished visits."""
        import ray

        pages = [o for o in outcomes if o.kind == "page"]
        to_parse = [o.fr for o in pages if o.fr.error is None and 200 <= o.fr.status < 300 and self.postfetch(o.fr)]
        parsed = dict(zip([fr.url for fr in to_parse],
                          ray.get(self.parser.parse_batch.remote(to_parse)) if to_parse else [], strict=True))
        # Exact duplicates: the first URL with a text digest owns it (HSETNX), shared by all agents;
        # the owner's date and payload SHA-1 come along, so that a duplicate whose bytes are the
        # owner's can be a WARC revisit (and only then).
        dkey = self.f.key("digest")
        with_digest = [(fr, parsed[fr.url]) for fr in to_parse if parsed[fr.url].digest]
        payloads = [(fr, sha1_b32(fr.body)) for fr, _ in with_digest]
        pipe = self.client.pipeline(transaction=False)
        for (fr, pr), (_, payload) in zip(with_digest, payloads, strict=True):
            pipe.hsetnx(dkey, pr.digest.hex(), json.dumps([fr.url, warc_date(fr.ended), payload]))
        for _, pr in with_digest:
            pipe.hget(dkey, pr.digest.hex())
        dup_of, revisit_of = exact_duplicates(payloads, pipe.execute()[len(with_digest):])
        if self.near is not None:
            docs = [(fr.url, pr.text) for fr, pr in with_digest if fr.url not in dup_of and pr.text]
            for (url, _), rep in zip(docs, self.near.check_and_add(docs), strict=True):
                if rep is not None and rep != url:
                    dup_of[url] = (rep, "near")
        decision = decide(outcomes, parsed, dup_of, revisit_of, self.prefetch.explain, self.spam_gate)
        items, counters, follow = decision.items, decision.counters, decision.follow
        refs = [self.store.write_batch.remote(items)]
        if self.summary_writer is not None:
            # The pages a post-crawl build reads from the WARC (full 200 HTML responses, same decoding);
            # spilled before the commit, so a committed batch's summaries are durable too.
            # (responses cut at the size caps included, as they are archived too).
            html = [(o.fr.url, decode_body(o.fr.body, o.fr.charset)[0]) for o in pages
                    if o.fr.url not in dup_of and o.fr.status == 200 and o.fr.ctype in HTML_TYPES]
            if html:
                refs.append(self.summary_writer.spill.remote(html))
        latencies = [o.fr.ended - o.fr.started for o in pages if o.fr.status]
        delivered = self._deliver(follow)
        _get_all(refs)
        if delivered:
            self._commit([o.key for o in outcomes], counters, latencies)
        else:
            self.deferred.append(([o.key for o in outcomes], counters, follow, latencies))

    def _shutdown(self) -> None:
        from raycrawl.redis_server import lost

        try:
            if lost(self.redis_url):
                # Nothing can be committed: what the fetchers hold stays in the in-flight set (--resume).
                log.warning("agent %s: Redis is gone; stopping without committing the visits in flight", self.name)
            else:
                self._stop_fetching()
        except Exception as exc:  # noqa: BLE001 - report what we have; the in-flight set covers the rest
            if isinstance(exc, UserError) or storage_failure(exc) is not None:  # said once, by the caller
                log.warning("agent shutdown incomplete: %s", getattr(exc, "cause", None) or exc)
            else:
                log.exception("agent shutdown incomplete")
        if self.standalone:
            self.close()

    def _stop_fetching(self) -> None:
        """Stop every fetch actor (each finishes its fetches and releases their hosts) and store and
        commit the visits they hand over. One that does not answer is skipped: its URLs stay in
        the in-flight set, which recover_view or --resume put back."""
        import ray

        rest: list[Outcome] = []
        stops = [f.stop.remote() for f in self.fetchers]
        for f, stop in zip(self.fetchers, stops, strict=True):
            try:
                ray.get(stop, timeout=60)
                rest += ray.get(f.drain.remote(10**9, 0), timeout=60)
            except ray.exceptions.RayError:
                log.warning("agent %s: a fetch actor did not answer while stopping", self.name)
        if rest:
            self._process(rest)

    def close(self) -> None:
        """Close the stores and the sieve, end the agent's actors. With several agents, only once
        every agent has stopped: until then others may still send links to this agent's sieve."""
        import ray

        closing = [self.store.close.remote(), self.sieve.close.remote()]
        if self.summary_writer is not None:
            closing.append(self.summary_writer.close.remote())
        for ref in closing:  # each one's outcome read, so Ray reports no error as unhandled
            try:
                ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                if isinstance(getattr(exc, "cause", None), OSError):
                    log.warning("agent %s: closing a store failed: %s", self.name, exc.cause)
                else:
                    log.exception("agent shutdown incomplete")
            except Exception:  # noqa: BLE001 - report what we have; the in-flight set covers the rest
                log.exception("agent shutdown incomplete")
        for actor in [*self.fetchers, self.parser, self.store, self.sieve, self.summary_writer]:
            if actor is not None:
                ray.kill(actor)
        if self.near is not None:
            self.near.close()


def actor_class():
    """An agent as a Ray actor, for crawls with several agents: the agent's loop runs in the actor
    (threaded, so ``run`` may block while the driver pauses and resumes it), its
    sieve/fetch/parser/store actors on the same node."""
    import ray

    @ray.remote(num_cpus=0, max_concurrency=4)
    class AgentActor:
        def __init__(self, settings: Settings, redis_url: str, name: str, shards: dict[int, str],
                     budget: int | None) -> None:
            logging.basicConfig(level=logging.WARNING)
            self.agent = Agent(settings, redis_url, None, name=name, shards=shards, budget=budget)

        def start(self) -> None:
            self.agent.start()

        def run(self) -> dict[str, Any]:
            report = self.agent.run(prepare=False)
            return {"agent": self.agent.name, "pages": self.agent.run_pages, "stopped": report["stopped"]}

        def pause(self) -> bool:
            return self.agent.request_pause()

        def give(self, shards: list[int]) -> None:
            ray.get(self.agent.sieve.give.remote(shards))

        def take(self, shards: list[int]) -> None:
            ray.get(self.agent.sieve.take.remote(shards))

        def resume(self, shards: dict[int, str], budget: int | None) -> None:
            self.agent.resume(shards, budget)

        def close(self) -> None:
            self.agent.close()

    return AgentActor


def _get_all(refs: list) -> list:
    """ray.get of every ref, even after one failed (so Ray reports none as unhandled); then raise
    the first failure."""
    import ray

    results, first = [], None
    for ref in refs:
        try:
            results.append(ray.get(ref))
        except Exception as exc:  # noqa: BLE001 - re-raised below, once all are read
            first = first or exc
    if first is not None:
        raise first
    return results
