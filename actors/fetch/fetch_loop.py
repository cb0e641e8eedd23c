"""The fetch loop: BUbiNG's fetching threads as one asyncio loop over the shared workbench.

It acquires ready hosts from the workbench (Redis), fetches one URL per host — robots.txt of the
URL's origin first (:mod:`actors.fetch.robots_fetch`), then pages the robots rules allow — and
releases each host as soon as its response has ENDED, so the next fetch of the host and of its
IP is scheduled from the end of the response. Up to
``concurrency`` fetches run at once; hosts and IPs are never fetched twice at a time because the
workbench hands out each at most once until released.

Completed exchanges wait in a buffer for the agent to :meth:`FetchLoop.drain`; they leave the
workbench's in-flight set only when the agent commits them (after storing), so a crash re-fetches
at most what was in flight or buffered — at most ``max_uncommitted`` visits, since the loop
acquires nothing more while that many are in flight or buffered. Transient failures
(connect/timeout/reset, 429/5xx) go back to the front of their visit state with exponential
back-off, up to ``max_retries`` times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from raycrawl import metrics
from raycrawl.actors import named, per_batch
from raycrawl.actors.cluster.lease import Lease
from raycrawl.actors.fetch.dns import Resolver
from raycrawl.actors.fetch.robots_fetch import RobotsFetch
from raycrawl.actors.fetch.shared_cookies import SharedCookies
from raycrawl.actors.fetch.site_login import SiteLogins
from raycrawl.actors.frontier.workbench import (
    ROBOTS,
    Release,
    Workbench,
    inflight_key,
    inflight_url,
    is_robots,
    robots_marker,
)
from raycrawl.actors.visit.chain import fetch_hooks
from raycrawl.actors.visit.visit_stage import Outcome
from raycrawl.exchange import LOCAL, PROXY, FetchResult, VisitKind
from raycrawl.file_limit import files_needed, raise_file_limit
from raycrawl.policies.adaptive_delay import AdaptiveDelays
from raycrawl.policies.front_queues import split_level
from raycrawl.policies.politeness import Politeness, response_end
from raycrawl.policies.robots import PROXY_FAILED
from raycrawl.redis_server import connect
from raycrawl.servers import name_of, origin_of
from raycrawl.settings import Settings, parse_hostport
from raycrawl.stops import storage_failure
from raycrawl.storage.capture import Capture
from raycrawl.storage.crawl_dir import join_run, read_crawl_id

log = logging.getLogger(__name__)

LOCAL_RETRY = 1.0  # seconds a URL waits after a request that failed for want of a file descriptor
PROXY_RETRY = 5.0  # seconds a URL waits after its proxy failed the request
# Longest sleep of the acquire loop with nothing due sooner. What it waits for wakes it: a visit
# ending, the agent's next drain (which follows the agent putting URLs in the workbench), the
# earliest politeness deadline. The bound covers what changes in Redis unannounced (an operator's
# pause lifted, another agent releasing a shared IP). At 50 ms, a crawl waiting on politeness
# cost ~3.5 % of a core here (and Redis) in acquires that found nothing.
POLL_S = 0.25
# Seconds the lease must still run for a host to be acquired: the time from an acquire to its
# request's start (the fetcher checks again right before sending).
LEASE_MARGIN = 1.0


class FetchLoop:
    """Plain asyncio class; :func:`actor_class` wraps it in a Ray actor."""

    def __init__(self, settings: Settings, redis_url: str, budget: int | None = None, view: str = "agent0") -> None:
        self.s = settings
        self.client = connect(redis_url)
        # Fencing: no request starts unless this agent's lease surely runs (actors/cluster/lease.py).
        self.lease = Lease(redis_url, settings.redis_prefix, view)
        self.politeness = Politeness.of(settings)
        self.adaptive = AdaptiveDelays(settings.delay_factor, settings.max_adaptive_delay, settings.host_delay)
        self.wb = Workbench(self.client, settings.redis_prefix, self.politeness, view=view)
        self.budget = budget  # page fetches this loop may still start (None = unlimited)
        self.attempts: dict[str, int] = {}
        self.done: list[Outcome] = []
        self.releases: list[Release] = []
        self.tasks: set[asyncio.Task] = set()
        self.earliest: float | None = None
        self.waited = 0  # loop rounds with free slots and nothing ready (distributor feedback)
        # Seconds with free slots while every queued host of the view waited on its delays (the
        # politeness-wait metric), and what was exported of it and of the resolver's
        # answered/failed counts.
        self.idle_s, self._idle_since, self._polite_idle = 0.0, None, False
        self.view, self._exported, self._next_export = view, (0, 0, 0.0), 0.0
        self.counters = {"requests": 0, "robots_requests": 0, "retries": 0, "local_failures": 0, "proxy_failures": 0}
        self.proxy_down: dict[str, float] = {}  # proxy URL → since when it failed every request
        self.proxy_said: dict[str, float] = {}  # (when its failure was last logged)
        # The loop's writes to Redis run on a thread of their own, one at a time and in order: while
        # Redis is slow or holds writes (a failover, a stalled fsync, a membership change's CLIENT
        # PAUSE), the responses on the wire go on being read. On the loop's thread they waited, and a
        # request whose response had long arrived timed out when the loop ran again, and was
        # fetched a second time.
        self._redis_thread = ThreadPoolExecutor(1, thread_name_prefix="fetch-redis")
        self.robots_fetch = RobotsFetch(settings, self.politeness, self.wb, self.counters, self._off_loop, self._waits)
        self.robots = self.robots_fetch.cache  # origin → rules (the tests read them here)
        # The stages' say here (actors/visit/chain.py): queued URLs refused (the operator's blocks,
        # scope and budgets, the spam gate's hosts), the operator's pause and throttles.
        self.hooks = fetch_hooks(settings, self.wb.frontier)
        if self.hooks.delay is not None:
            self.wb.delay_of = self.hooks.delay
        # A periodic crawl's pass: the last captures of the URLs acquired (conditional GETs).
        self.epoch = self.wb.frontier.epoch()
        self.priors: dict[str, Capture] = {}
        self._wake = asyncio.Event()
        self._visited = asyncio.Event()  # a visit ended (drain's wake-up)
        self._stop = False
        self._runner: asyncio.Task | None = None
        self.fetcher = None
        self.resolver = None
        self.logins: SiteLogins | None = None  # (with a session file that has form logins: _make_clients)

    def _make_clients(self) -> None:
        from raycrawl.actors.fetch.fetcher import Fetcher
        from raycrawl.policies.networks import NetworkPolicy
        from raycrawl.proxies import ProxyRules
        from raycrawl.site_sessions import SiteSessions

        s = self.s
        proxies = ProxyRules.of(s) if s.proxy or s.proxy_rules else None
        self.resolver = Resolver(dns_server=parse_hostport(s.dns_server) if s.dns_server else None,
                                 hosts_file=s.resolve, remote=proxies.resolves if proxies else None)
        self._exported = (0, 0, self._exported[2])  # a new resolver counts from 0
        raise_file_limit(files_needed(s))
        self.fetcher = Fetcher(s.user_agent, s.connect_timeout, s.read_timeout, s.max_body, s.max_decompressed,
                               NetworkPolicy(s.allow_networks), max_connections=max(s.fetch_concurrency, 16),
                               keepalive_timeout=s.keepalive_timeout, max_idle=s.max_idle_connections,
                               proxies=proxies,
                               sessions=SiteSessions.read(s.session_file) if s.session_file else None)
        self.fetcher.gate = self.lease.valid
        sessions = self.fetcher.sessions  # (no per-page login work unless some site has a login)
        self.logins = SiteLogins(sessions) if sessions is not None and any(s.login for s in sessions.sites) else None
        if self.fetcher.cookies is not None:  # (one jar for the crawl, in its Redis)
            self.fetcher.cookie_sync = SharedCookies(self.client, s.redis_prefix, self.fetcher.cookies, self._off_loop)
        self.lease.start()  # once: renewals run as long as the actor, paused or not

    async def _off_loop(self, fn, *args):  # noqa: ANN001, ANN002, ANN202 - whatever fn takes and returns
        return await asyncio.get_running_loop().run_in_executor(self._redis_thread, fn, *args)

    # --- control -------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start (or, after :meth:`stop`, restart) acquiring and fetching."""
        if self.fetcher is None:
            self._make_clients()
            metrics.bind_crawl(read_crawl_id(self.s.out) if self.s.out else None)
        self._stop = False
        self._runner = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop acquiring, wait for in-flight fetches, release their hosts."""
        self._stop = True
        self._wake.set()
        if self._runner:
            await self._runner
        self._visited.set()  # idle and stopped: a waiting drain returns
        if self.fetcher:
            await self.fetcher.close()
        if self.resolver:
            await self.resolver.close()
        self.fetcher = self.resolver = None

    async def resolve_many(self, names: list[str]) -> dict[str, str | None]:
        if self.resolver is None:
            self._make_clients()
        return await self.resolver.resolve_many(names)

    def consume_budget(self, n: int) -> None:
        if self.budget is not None:
            self.budget -= n

    def set_budget(self, n: int | None) -> None:
        """A new share of the page budget (the agent's membership or its fetch actors changed)."""
        self.budget = n

    async def drain(self, max_items: int, wait: float, linger: float | None = None) -> list[Outcome]:
        """Up to ``max_items`` finished visits, waiting up to ``wait`` s for the first one, then, once
        one has ended, until ``linger`` s after the call (``settings.drain_linger`` when None) for
        more, up to ``max_items``."""
        self._check_runner()
        self._wake.set()  # the agent may have just queued URLs: acquire now
        start = time.monotonic()
        deadline = start + wait
        # Woken by each visit that ends (``_done``), not by polling: a crawl waiting on politeness
        # costs no CPU here.
        while not self.done and not (self.idle() and self._stop) and (left := deadline - time.monotonic()) > 0:
            self._visited.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._visited.wait(), left)
        until = start + (self.s.drain_linger if linger is None else linger)
        if self.done:  # (then more, up to a batch: settings.drain_linger)
            while len(self.done) < max_items and not self._stop and (left := until - time.monotonic()) > 0:
                self._visited.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._visited.wait(), left)
        out, self.done = self.done[:max_items], self.done[max_items:]
        return out

    def _check_runner(self) -> None:
        """Raise the error the loop crashed with (a bug: storage failures stop it quietly, see
        :meth:`_run`), so that the agent stops the crawl instead of waiting for visits forever."""
        runner = self._runner
        if runner is not None and runner.done() and not runner.cancelled() and runner.exception() is not None:
            raise RuntimeError("the fetch loop crashed") from runner.exception()

    def idle(self) -> bool:
        """Nothing in flight, nothing buffered, nothing waiting to be released."""
        return not self.tasks and not self.done and not self.releases

    def status(self) -> dict[str, object]:
        waited, self.waited = self.waited, 0
        dns = (self.resolver.queries, self.resolver.answered, self.resolver.failures) if self.resolver else (0, 0, 0)
        return {"in_flight": len(self.tasks), "buffered": len(self.done), "idle": self.idle(),
                "earliest": self.earliest, "budget": self.budget, "waited": waited, **self.counters,
                "dns_lookups": dns[0], "dns_answered": dns[1], "dns_failures": dns[2],
                "politeness_idle_s": round(self.idle_s, 3)}

    def _account_idle(self) -> None:
        """Add the time since the last round to ``idle_s`` if that round left slots free while
        the view's hosts all waited on politeness; export the metrics about once a second."""
        now = time.monotonic()
        if self._idle_since is not None:
            self.idle_s += now - self._idle_since
        self._idle_since = now if self._polite_idle else None
        if now >= self._next_export and self.resolver is not None:
            self._next_export = now + 1.0
            # Lookups by how they finished (one still waiting for its answer is in neither yet).
            answered, failures = self.resolver.answered, self.resolver.failures
            a0, f0, idle0 = self._exported
            try:
                metrics.record_fetcher(self.view, answered - a0, failures - f0, self.idle_s - idle0)
            except Exception:  # noqa: BLE001 - a metric must never stop the fetchers
                log.exception("metrics export failed")
            self._exported = (answered, failures, self.idle_s)

    # --- the loop ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while True:
                if self._stop:
                    await self._flush_releases()
                    if not self.tasks:
                        if not self.releases:
                            return
                        continue  # visits that ended during that flush: their hosts too
                else:
                    await self._acquire()
                self._account_idle()
                timeout = POLL_S
                if self.earliest is not None:
                    timeout = min(timeout, max(0.001, self.earliest - time.time()))
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        except Exception as exc:
            stop = storage_failure(exc)
            if stop is None:
                log.exception("fetch loop crashed")
                raise
            log.warning("fetch loop stopped: %s", stop)  # the agent stops the crawl with the same line
            self._stop = True

    async def _acquire(self) -> None:
        # Bounded in flight AND in the buffer: what a crash can cost twice stays within max_uncommitted.
        slots = min(self.s.fetch_concurrency - len(self.tasks),
                    self.s.max_uncommitted - len(self.tasks) - len(self.done))
        if self.budget is not None:
            slots = min(slots, self.budget)
        if self.hooks.paused is not None and self.hooks.paused():  # (what is in flight finishes)
            slots = 0
        if not self.lease.valid(LEASE_MARGIN):  # renewals failing (Redis away) or the agent fenced
            slots = 0
        if slots <= 0:
            self._polite_idle = False
            await self._flush_releases()
            return
        releases, self.releases = self.releases, []
        got, self.earliest = await self._off_loop(self.wb.release_and_acquire, releases, time.time(), slots)
        if len(got) < slots and (self.earliest is None or self.earliest > time.time()):
            self.waited += 1
        self._polite_idle = len(got) < slots and self.earliest is not None and self.earliest > time.time()
        if self.epoch:
            await self._load_priors([(host, entry) for host, ip, entry in got if not is_robots(entry)])
        more = self.wb.frontier.more  # hosts with more URLs queued: their connections are worth keeping
        for host, ip, entry in got:
            if self.budget is not None and not is_robots(entry):
                self.budget -= 1
            task = asyncio.create_task(self._visit(host, ip, entry, host in more))
            self.tasks.add(task)
            task.add_done_callback(self._done)

    def _refused(self, url: str, host: str) -> str | None:
        return None if self.hooks.refuse is None else self.hooks.refuse(url, name_of(host))

    async def _load_priors(self, entries: list[tuple[str, str]]) -> None:
        """One round trip for the last captures of the URLs a revisit pass just acquired."""
        keys = [inflight_key(host, entry) for host, entry in entries]
        urls = [inflight_url(k) for k in keys]
        for key, capture in zip(keys, await self._off_loop(self.wb.frontier.priors, urls), strict=True):
            if capture is not None:
                self.priors[key] = capture

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("visit failed: %r", task.exception())
        self._wake.set()
        self._visited.set()

    async def _flush_releases(self) -> None:
        if self.releases:
            batch, self.releases = self.releases, []
            await self._off_loop(self.wb.release, batch)

    def _release(self, host: str, ip: str, end: float | None = None, crawl_delay: float | None = None,
                 putback: tuple[str, ...] = (), not_before: float | None = None) -> None:
        """Hand server ``host`` back to the workbench (``end`` None: nothing was sent to it)."""
        self._released([Release(host, ip, end=end, crawl_delay=crawl_delay, putback=putback, not_before=not_before)])

    def _put_back(self, host: str, ip: str, entry: str, page: bool = True, **release: float | None) -> None:
        """Release ``host`` with its URL ``entry`` put back at the front of its visit state, for a
        later turn; a page's fetch is given back to the budget (it was not spent on the page)."""
        if page and self.budget is not None:
            self.budget += 1
        self._release(host, ip, putback=(entry,), **release)

    def _not_fetched(self, host: str, ip: str, key: str, url: str, level: int, error: str, now: float,
                     started: float = 0.0) -> None:
        """The page ``url`` recorded as ``error`` without a request to it; its host released as it was."""
        self._release(host, ip)
        self.done.append(Outcome(key, VisitKind.PAGE, FetchResult(url=url, ip=ip, started=started, ended=now, error=error),
                                 level=level))

    def _released(self, releases: list[Release]) -> None:
        self.releases += releases
        self._wake.set()

    def _keep_alive(self, host: str, more: bool, crawl_delay: float | None) -> bool:
        """Keep the connection after this request: the host has more URLs queued and its next visit
        is due within the keep-alive time."""
        delay = max(self.politeness.effective_host_delay(crawl_delay), self.adaptive.delays.get(host, 0.0))
        return more and delay < self.s.keepalive_timeout

    def _waits(self, fr: FetchResult) -> bool:
        """Whether a failed request waits to be tried again, nothing having reached its host: it
        failed on OUR side (no file descriptor left), or its proxy failed it, for less than
        ``proxy_patience`` s (past that, its URLs are recorded as failed, ``proxy``, until a request
        through it succeeds: the crawl can end)."""
        if fr.error == LOCAL:
            return True
        if fr.via is None:
            return False
        if fr.error != PROXY:
            self.proxy_down.pop(fr.via, None)  # it answered
            return False
        since = self.proxy_down.setdefault(fr.via, fr.ended or time.time())
        return time.time() - since < self.s.proxy_patience

    def _local_failure(self, host: str, ip: str, entry: str, fr: FetchResult, page: bool) -> bool:
        """A request that failed with nothing reaching the host (:meth:`_waits`): the URL goes back
        untouched (no attempt counted, robots.txt not ruled unavailable, nothing held against the
        host) and the host waits a moment. True if ``fr`` was such a failure."""
        if not self._waits(fr):
            return False
        if fr.error == PROXY:
            if time.time() - self.proxy_said.get(fr.via, 0) >= 30:
                self.proxy_said[fr.via] = time.time()
                log.warning("proxy %s failed a request (%s: %s); the URLs behind it wait and are tried again",
                            fr.via, fr.url, self.fetcher.proxy_reasons.get(fr.via, "no answer"))
            self.counters["proxy_failures"] += 1
            self._put_back(host, ip, entry, page, not_before=time.time() + PROXY_RETRY)
            return True
        if not self.lease.valid():
            log.warning("not fetching %s: this agent's lease is not renewed (Redis away, or the agent was "
                        "declared departed)", fr.url)
        else:
            log.warning("out of file descriptors fetching %s; trying again in %.0f s", fr.url, LOCAL_RETRY)
        self.counters["local_failures"] += 1
        self._put_back(host, ip, entry, page, not_before=time.time() + LOCAL_RETRY)
        return True

    async def _visit(self, host: str, ip: str, entry: str, more: bool = False) -> None:
        """Visit one entry of server ``host``'s visit state (a page, or robots.txt of an origin)."""
        origin, rest = origin_of(host, entry)
        if rest.startswith(ROBOTS):
            robots = origin + "/robots.txt"
            if self.hooks.refuse_robots is not None and self.hooks.refuse_robots(robots, name_of(host)):
                self._release(host, ip)  # the operator blocked it after it was queued
                self.done.append(Outcome(inflight_key(host, entry), VisitKind.ROBOTS,
                                         FetchResult(url=robots, ip=ip, ended=time.time(),
                                                     error="blocked")))
                return
            step = await self.robots_fetch.visit(self.fetcher, self.resolver, host, ip, entry, origin, rest,
                                                 keep_alive=self._keep_alive(host, True, None))
            self._released(step.releases)
            if step.local is not None:
                self._local_failure(host, ip, entry, step.local, page=False)
            elif step.fr is not None:
                self.done.append(Outcome(inflight_key(host, entry), VisitKind.ROBOTS, step.fr))
            return
        path, level = split_level(rest)  # a focused crawl's priority travels with the path
        key, url = inflight_key(host, entry), origin + path
        now = time.time()
        why = self._refused(url, host) if key not in self.attempts else None
        if why is not None:
            # A stage refused it after it was queued (the spam gate blocked its host): not fetched
            # (a retry is finished), and recorded as such (no request began: started 0).
            self._not_fetched(host, ip, key, url, level, why, now)
            return
        rules = self.robots_fetch.rules(origin)
        if rules is None or rules.expired(now):
            # robots.txt of this URL's origin first (again, once expired): in front of it, politely.
            if self.budget is not None:
                self.budget += 1
            self._release(host, ip, putback=(robots_marker(entry), entry))
            return
        crawl_delay = rules.crawl_delay
        if not rules.allowed(url):
            if rules.status == PROXY_FAILED:
                # robots.txt never got through its proxy (proxy_patience): not the site's doing, and
                # no request was sent for the page (no start recorded: the crawl log shows none)
                self._not_fetched(host, ip, key, url, level, PROXY, now)
                return
            # "robots-unavailable": robots.txt answered 429/5xx or not at all, so everything is off limits
            kind = "robots-unavailable" if rules.status == 0 or rules.status == 429 or rules.status >= 500 else "robots"
            self._not_fetched(host, ip, key, url, level, kind, now, started=now)
            return
        if self.logins is not None and await self._sign_in(url, host, ip, entry, key, level, crawl_delay, now):
            return
        prior = self.priors.get(key)
        fr = await self.fetcher.fetch(url, ip, headers=conditional_headers(prior),
                                      keep_alive=self._keep_alive(host, more, crawl_delay))
        if self._local_failure(host, ip, entry, fr, page=True):
            return
        self.counters["requests"] += 1
        if self.logins is not None and self.logins.walled(url, fr):
            # Its session expired: the wall is archived, the page fetched again once signed in.
            self._put_back(host, ip, entry, end=response_end(fr), crawl_delay=crawl_delay)
            self.done.append(Outcome("", VisitKind.SESSION, fr))
            return
        attempt = self.attempts.get(key, 0) + 1
        end = response_end(fr)
        slowed = end + self.adaptive.after(host, fr)  # (policies/adaptive_delay.py: a floor beside the others)
        if fr.transient and attempt <= self.s.max_retries:
            self.attempts[key] = attempt
            self.counters["retries"] += 1
            log.debug("retry %d of %s after %s", attempt, url, fr.error or fr.status)
            self._put_back(host, ip, entry, end=end, crawl_delay=crawl_delay,
                           not_before=max(self.politeness.retry_next(end, attempt, crawl_delay), slowed))
            return
        self.attempts.pop(key, None)
        self.priors.pop(key, None)
        self._release(host, ip, end, crawl_delay, not_before=slowed if slowed > end else None)
        self.done.append(Outcome(key, VisitKind.PAGE, fr, attempt, level, prior))

    async def _sign_in(self, url: str, host: str, ip: str, entry: str, key: str, level: int,
                       crawl_delay: float | None, now: float) -> bool:
        """Before a page of a site with a form login (actors/fetch/site_login.py): post the login
        as this turn's request and put the page back for the host's next turn, or record the page
        ``login-failed`` once its site spent its tries. False: fetch the page now."""
        form = self.logins.before(url)
        if form is False:
            return False
        if form is True:
            self._not_fetched(host, ip, key, url, level, "login-failed", now)
            return True
        fr = await self.fetcher.fetch(form.url, ip, form=form)
        if self._local_failure(host, ip, entry, fr, page=True):
            return True
        self.counters["requests"] += 1
        self.logins.judge(url, fr)
        self._put_back(host, ip, entry, end=response_end(fr), crawl_delay=crawl_delay)
        self.done.append(Outcome("", VisitKind.SESSION, fr))
        return True


def conditional_headers(prior: Capture | None) -> dict[str, str] | None:
    """The validators of a revisit's conditional GET (RFC 9110 §13.1): If-None-Match with the
    last capture's ETag, If-Modified-Since with its Last-Modified (a server given both decides by
    the ETag)."""
    if prior is None:
        return None
    headers = {}
    if prior.etag:
        headers["If-None-Match"] = prior.etag
    if prior.modified:
        headers["If-Modified-Since"] = prior.modified
    return headers or None


def actor_class():
    """The Ray actor shell (async actor: one event loop runs the fetch loop and serves calls)."""
    import ray

    # Restarted by Ray when its process dies; the agent then recovers its in-flight URLs and calls
    # start() again (actors.cluster.agent.Agent._recover_fetchers).
    @ray.remote(num_cpus=0, max_concurrency=64, max_restarts=-1)
    @named
    class FetchActor:
        def __init__(self, settings: Settings, redis_url: str, budget: int | None, view: str = "agent0") -> None:
            # a killed run's fetcher (or a dead agent's) may still be talking to a host: the next run
            # (or the agent taking its hosts over) waits for it; storage/crawl_dir.py
            self.run_lock = join_run(settings.out, view) if settings.out else None
            self.loop = FetchLoop(settings, redis_url, budget, view)

        async def start(self) -> None:
            await self.loop.start()

        async def stop(self) -> None:
            await self.loop.stop()

        @per_batch
        async def drain(self, max_items: int, wait: float, linger: float | None = None) -> list[Outcome]:
            return await self.loop.drain(max_items, wait, linger)

        @per_batch
        async def drain_with_status(self, max_items: int, wait: float,
                                    linger: float | None = None) -> tuple[list[Outcome], dict[str, object]]:
            """:meth:`drain`, then :meth:`status`: the agent's loop makes one call per round, not two."""
            return await self.loop.drain(max_items, wait, linger), self.loop.status()

        @per_batch
        async def resolve_many(self, names: list[str]) -> dict[str, str | None]:
            return await self.loop.resolve_many(names)

        @per_batch
        async def consume_budget(self, n: int) -> None:
            self.loop.consume_budget(n)

        async def set_budget(self, n: int | None) -> None:
            self.loop.set_budget(n)

    return FetchActor
