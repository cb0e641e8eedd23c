"""Membership: which agents crawl, on which Ray nodes, owning which shards — and changing that while
the crawl runs (BUbiNG/UbiCrawler's agents joining and leaving).

The crawl's driver (the process ``raycrawl crawl`` runs in, e.g. a Ray job's entrypoint) places one
agent per node and then only watches: agents talk to Redis and to each other's sieves, never to it.
It acts when membership changes:

- a node joins (``--elastic``): a new agent is started there and takes a share of the shards;
- an agent dies (its node left or crashed, or its process was killed): the others take its shards.

A change is a short stop-the-world, which keeps it simple to reason about. Every surviving agent
stops fetching and commits what it fetched (:meth:`actors.cluster.agent.Agent.request_pause`); a dead
agent's in-flight URLs go back to their visit states (``recover_view``, as after a crash); the new
shard map is computed by consistent hashing with bounded loads, so only the joining or leaving
agent's share moves; agents close the sieve shards they lose; Redis moves those shards' hosts to
their new owners' views (lua/move.lua); new owners open the shards (the sieve's pending log replays
what the old owner had not merged; the shard's offset in Redis says what was already distributed);
then everyone resumes. So no URL is lost and none is fetched twice across the move except those in
flight at an agent's death — the same guarantee as a crash and ``--resume``. Shards live under
``OUT/sieve``, so ``OUT`` must be on storage every node reaches (one machine, or a shared
filesystem on a cluster) — or, with ``agent_dir`` and ``out_store``, each agent works in its own
directory and a shard's files move through the object store (storage/shard_handoff.py); then a
dead agent's shards are taken over from their last checkpoint in the store and their logs in
Redis (storage/shard_log.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raycrawl.actors.cluster.agent import AGENT0, Agent
from raycrawl.actors.cluster.agent_actor import actor_class
from raycrawl.actors.cluster.crew import split_budget
from raycrawl.actors.cluster.lease import TTL as LEASE_TTL
from raycrawl.actors.cluster.lease import longest_fetch
from raycrawl.actors.frontier.link_router import sieve_actor_name
from raycrawl.errors import UserError
from raycrawl.policies.assignment import apply_shards, assign_shards
from raycrawl.redis_server import connect
from raycrawl.report import build_report, write_report
from raycrawl.settings import Settings
from raycrawl.stops import storage_failure
from raycrawl.storage.crawl_dir import agent_out, agent_workers_gone, begin, layout, read_crawl_id
from raycrawl.storage.redis_frontier import RedisFrontier
from raycrawl.storage.shard_handoff import orphan_holders

log = logging.getLogger(__name__)

# Seconds between looks at the cluster's nodes (joins); deaths are seen when an agent's run() fails.
POLL = 2.0
# Seconds a dead agent's lease may go on being renewed before the crawl stops (Membership._fence).
FENCE_PATIENCE = 6 * LEASE_TTL
# An agent whose lease lapsed this long ago is dead, whatever Ray says yet: a lost VM is seen in
# TTL + this, where Ray's missed heartbeats took 60-70 s (measured, tests/netns_cluster.py). Its
# fetch actors stopped at the lapse; a TTL more covers one restarting (Ray restarts it in seconds).
LEASE_SILENCE = LEASE_TTL
STOP_WAIT = 60  # seconds for running agents to end their loops when the crawl stops


@dataclass
class Member:
    actor: Any
    node: str
    run: Any = None


class Membership:
    """Starts the agents, watches them and the cluster, rebalances on joins and deaths."""

    def __init__(self, settings: Settings, redis_url: str) -> None:
        self.s = settings
        self.url = redis_url
        self.f = RedisFrontier(connect(redis_url), settings.redis_prefix)
        self.cls = actor_class()
        self.live: dict[str, Member] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.shards: dict[int, str] = {}
        self.events: list[dict[str, Any]] = []
        self.recovered = 0
        self.lost_nodes: set[str] = set()
        self.tagged = False  # a node with the ``agent`` resource was seen
        self._count = 0
        self.crawl_id = read_crawl_id(settings.out) or ""

    # --- placement -----------------------------------------------------------------------------------
    def agent_nodes(self, draining: dict[str, int] | None = None) -> list[str]:
        """Alive nodes that hold agents: those with the ``agent`` resource (ray_cluster.yaml's
        worker type; keeps the head free), or every alive node if no node ever had it. (Once one
        had it, the head stays free even when every agent node is gone: the crawl stops, to be
        resumed on new ones, rather than crawl from the head.)"""
        import ray

        draining = draining_nodes() if draining is None else draining
        alive = [n for n in ray.nodes() if n["Alive"] and n["NodeID"] not in draining]
        tagged = [n for n in alive if n.get("Resources", {}).get("agent", 0) > 0]
        self.tagged = self.tagged or bool(tagged)
        return sorted(n["NodeID"] for n in (tagged if self.tagged else alive))

    def _new_name(self) -> str:
        name = f"agent{self._count}"
        self._count += 1
        return name

    def _budgets(self, names: list[str]) -> dict[str, int | None]:
        left = max(0, self.s.max_pages - self.f.pass_pages()) if self.s.max_pages else None
        return dict(zip(names, split_budget(left, len(names)), strict=True))

    def _spawn(self, name: str, node: str, budget: int | None) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self.cls.options(name=f"raycrawl-{self.s.redis_prefix}{name}",
                                 scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
            agent_out(self.s, self.crawl_id, name), self.url, name, self.shards, budget)
        self.live[name] = Member(actor, node)

    def start(self) -> None:
        from raycrawl import metrics

        metrics.bind_crawl(self.crawl_id or None)
        nodes = self.agent_nodes()
        count = len(nodes) if self.s.elastic else self.s.agents
        placed = {self._new_name(): nodes[i % len(nodes)] for i in range(count)}
        self.shards = assign_shards(placed, previous=self.f.shard_owners() or None)
        apply_shards(self.f, self.shards)
        budgets = self._budgets(list(placed))
        for name, node in placed.items():
            self._spawn(name, node, budgets[name])
        started = self._each(list(self.live), "start")
        if not started:
            raise UserError("no agent could start: their nodes are gone (Ray still listed them)")
        for name in started:
            self.live[name].run = self.live[name].actor.run.remote()
        self._export()
        log.info("agents %s on %d nodes", sorted(started), len({placed[n] for n in started}))
        if failed := [n for n in placed if n not in started]:  # a node lost just before (Ray lists it a while)
            self.rebalance(failed, [])

    def _export(self, left: list[str] = (), joined: list[str] = ()) -> None:
        from raycrawl import metrics

        for a in [*self.live, *left]:
            metrics.metric("raycrawl_agent_shards").set(sum(o == a for o in self.shards.values()), tags={"agent": a})
        for change, names in (("joined", joined), ("left", left)):
            for a in names:
                metrics.metric("raycrawl_membership_changes").inc(1, tags={"agent": a, "change": change})

    # --- watching ------------------------------------------------------------------------------------
    def watch(self) -> None:
        """Until every agent's run() returned: record deaths, notice new nodes, rebalance."""
        import ray

        next_poll = time.time() + POLL
        while True:
            running = {m.run: name for name, m in self.live.items() if name not in self.results}
            if not running:
                return
            ready, _ = ray.wait(list(running), num_returns=len(running), timeout=1.0)
            dead = []
            for ref in ready:
                name = running[ref]
                try:
                    self.results[name] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    if storage_failure(exc) is not None:  # not a death: the whole crawl must stop
                        raise
                    if isinstance(exc, ray.exceptions.ActorUnavailableError):
                        # Out of reach for now (a network blip, a restart): not dead until Ray says
                        # so or its lease lapses (_silent); its loop goes on, ask for its outcome.
                        log.warning("agent %s out of reach: %s", name, str(exc).splitlines()[0][:200])
                        self.live[name].run = self.live[name].actor.outcome.remote()
                        continue
                    if isinstance(exc, ray.exceptions.RayTaskError):  # its loop raised: a bug, say where
                        log.error("agent %s failed; its hosts go to the others:\n%s", name, exc)
                    else:
                        log.warning("agent %s died: %s", name, str(exc).splitlines()[0])
                    dead.append(name)
            joined: list[str] = []
            leaving: list[str] = []
            if time.time() >= next_poll:
                next_poll = time.time() + POLL
                dead += self._silent([n for n in running.values() if n not in dead])
                draining = draining_nodes()  # (one question to Ray a poll, for leavers and joiners)
                leaving = [n for n in running.values() if n not in dead and self.live[n].node in draining]
                if self.s.elastic:  # (a node whose agent died is no newcomer, whatever Ray says yet)
                    used = {m.node for m in self.live.values()} | self.lost_nodes
                    joined = [n for n in self.agent_nodes(draining) if n not in used]
            if any(r["stopped"] == "frontier empty" for r in self.results.values()):
                # An agent saw the whole crawl idle: it is ending, and nothing was left to take over.
                for d in dead:
                    self.results[d] = {"agent": d, "pages": 0, "stopped": "died"}
                continue
            if dead or joined or leaving:
                self.rebalance(dead, joined, leaving)

    def _silent(self, names: list[str]) -> list[str]:
        """Agents whose lease lapsed more than LEASE_SILENCE ago: their node is gone (or cut off).
        Not while Redis itself may be why (it restarted less than a lease and that ago: nobody
        could renew), nor when every agent fell silent at once (Redis out of their reach is likelier
        than every node gone: Ray's own verdict decides then)."""
        if not names or self.f.r.info("server")["uptime_in_seconds"] < LEASE_TTL + LEASE_SILENCE:
            return []
        silent = []
        for name in names:
            lapsed = RedisFrontier(self.f.r, self.s.redis_prefix, view=name).lease_lapsed()
            if lapsed is not None and lapsed > LEASE_SILENCE:
                silent.append((name, lapsed))
        if len(silent) == len([n for n in self.live if n not in self.results]):
            return []
        for name, lapsed in silent:
            log.warning("agent %s died: its lease lapsed %.0f s ago (its node is gone or cut off)", name, lapsed)
        return [name for name, _ in silent]

    def rebalance(self, dead: list[str], joined: list[str], leaving: list[str] = ()) -> None:
        """Stop the world, move shards to (joined) or away from (dead, leaving) agents, resume. A
        joining agent's actors start before the pause (starting Ray workers takes seconds): it
        owns no shard and may fetch nothing until its share is moved to it. A leaving agent is
        paused like the others (it commits everything it fetched), puts its shards away as any
        agent that gives shards does, and ends once the others took them: nothing of it is
        fetched again."""
        import ray

        survivors = [n for n in self.live if n not in dead and n not in self.results]
        # The dead first, the world still running: waiting out a dead agent's lease (up to TTL)
        # stops nobody, and its hosts stay with its fenced view until they move below.
        t_dead = time.time()
        for d in dead:
            self._bury(d)
        buried = time.time() - t_dead
        new = {self._new_name(): node for node in joined}
        for name, node in new.items():
            self._spawn(name, node, 0 if self.s.max_pages else None)
        started = self._each(list(new), "start")
        for n in [n for n in new if n not in started]:  # its node went away at once
            del new[n], self.live[n]
        t0 = time.time()
        paused = self._each(survivors, "pause")
        stopped = time.time()
        late = [n for n in survivors if n not in paused]  # died meanwhile
        for d in late:
            self._bury(d)
        dead = dead + late
        survivors = [n for n in survivors if n in paused]
        if not all(paused.values()):  # an agent's loop ended meanwhile: the crawl is ending, change nothing
            log.warning("membership: the crawl ended while %s joined; nothing moved", sorted(new) or "nobody")
            budgets = self._budgets(survivors)
            self._each([n for n in survivors if paused[n]], "resume", lambda n: (self.shards, budgets[n]))
            for n in new:
                ray.kill(self.live.pop(n).actor)
            return
        leaving = [n for n in leaving if n in survivors]
        if leaving and not [n for n in survivors if n not in leaving] + list(new):
            log.warning("membership: %s drained, but no other agent can take its shards; it stays", leaving)
            leaving = []
        names = [n for n in survivors if n not in leaving] + list(new)
        if not names:
            raise UserError("every agent died (their nodes left or crashed); --resume continues the crawl")
        old = self.shards
        self.shards = assign_shards(names, previous=old)
        # From here an agent that dies is left to the next rebalance (its run() fails in watch()).
        self._each(survivors, "give", lambda n: ([s for s, a in old.items() if a == n and self.shards[s] != n],))
        self.f.clear_idle()  # termination marks of the old membership
        moved = apply_shards(self.f, self.shards)
        self._each(names, "take", lambda n: ([s for s, a in self.shards.items() if a == n and old.get(s) != n],))
        budgets = self._budgets(names)
        self._each(names, "resume", lambda n: (self.shards, budgets[n]))
        for n in new:
            self.live[n].run = self.live[n].actor.run.remote()
        for n in leaving:
            self._see_off(n)
        event = {"time": time.time(), "joined": sorted(new), "left": sorted([*dead, *leaving]),
                 "drained": sorted(leaving), "hosts_moved": moved,
                 "shards_moved": sum(old.get(s) != a for s, a in self.shards.items()),
                 "pause_s": round(time.time() - t0, 2), "stop_s": round(stopped - t0, 2), "bury_s": round(buried, 2)}
        self.events.append(event)
        self._export(left=[*dead, *leaving], joined=list(new))
        log.warning("membership: %s", event)

    def _see_off(self, name: str) -> None:
        """End an agent that gave all its shards away (its node drains): its loop returns, its
        directory's other files go to the store (close), then its actors."""
        import ray

        m = self.live[name]
        result = {"agent": name, "pages": 0}
        try:
            ray.get(m.actor.leave.remote(self.shards))
            result = ray.get(m.run, timeout=120)
            ray.get(m.actor.close.remote(), timeout=120)
        except ray.exceptions.RayError as exc:  # its node went before the deadline: nothing was in flight
            log.warning("agent %s: its node went while it left (%s)", name, str(exc).splitlines()[0])
        ray.kill(m.actor)
        del self.live[name]
        self.results[name] = {**result, "stopped": "left"}

    def _each(self, names: list[str], method: str, args=lambda n: ()) -> dict[str, Any]:
        """Call ``method`` on each named agent; the answers of those that did not die meanwhile."""
        import ray

        pending = {n: getattr(self.live[n].actor, method).remote(*args(n)) for n in names}
        out = {}
        while pending:
            ready, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=POLL)
            for n, ref in [(n, ref) for n, ref in pending.items() if ref in ready]:
                del pending[n]
                try:
                    out[n] = ray.get(ref)
                except ray.exceptions.RayError as exc:  # died, or its node vanished before it started
                    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc.cause, UserError):
                        raise _said(exc) from None  # (a shard it cannot have, a store that refuses)
                    log.warning("agent %s lost during a membership change (%s): %s", n, method,
                                str(exc).splitlines()[0])
            # A node lost without a trace: Ray would answer for it only after its heartbeats (a minute)
            for n in self._silent([n for n in pending if n in self.live]):
                log.warning("agent %s lost during a membership change (%s)", n, method)
                del pending[n]
        return out

    def _bury(self, name: str) -> None:
        """A dead agent: wait until its actors are gone (they share its fate: Ray kills the actors
        an actor created when it dies), fence it once its lease lapsed (actors/cluster/lease.py), then put
        its in-flight URLs back, due after its last request can have ended, and its unrecorded failures
        for the others to record."""
        import ray

        m = self.live.pop(name)
        self.lost_nodes.add(m.node)
        view = RedisFrontier(self.f.r, self.s.redis_prefix, view=name)
        self.results[name] = {"agent": name, "pages": 0, "stopped": "died"}
        ray.kill(m.actor, no_restart=True)
        # Shards in a shared OUT: wait until its sieve closed their files. Without one its files are
        # on its own disk, which Ray may not know lost for a minute: the fence is what matters.
        deadline = time.time() + (5 if self.s.agent_dir else 60)
        sieve = sieve_actor_name(self.s.redis_prefix, name)
        while time.time() < deadline:
            try:
                ray.kill(ray.get_actor(sieve), no_restart=True)
            except ValueError:
                break  # no such actor any more: its shard files are closed
            time.sleep(0.2)
        own = agent_out(self.s, self.crawl_id, name).out
        if not agent_workers_gone(own, name):
            log.warning("agent %s: a fetcher of it may still hold %s; its hosts are taken over anyway",
                        name, layout(Path(own)).workers)
        fenced = self._fence(view)
        # Its requests all began before the fence and end within the longest fetch: its in-flight
        # hosts and IPs are due a full delay after that (a request may still be on the wire).
        p = self.s.host_delay, self.s.ip_delay
        n = view.recover_view(fenced + longest_fetch(self.s), *p)
        self.f.commit([], {"recovered": n}, by_view=False)
        self.recovered += n
        # Its failures (DNS, forbidden network) not yet recorded: their records went with its node.
        orphans = view.orphan_failing()
        log.warning("agent %s: %d in-flight URLs put back, %d failures left for others to record", name, n, orphans)

    @staticmethod
    def _fence(view: RedisFrontier) -> float:
        """Wait for a dead agent's lease to lapse, then fence it (actors/cluster/lease.py); when, by this
        machine's clock. A lease still renewed long after its agent's death is a fetch actor that
        outlived it (a node cut off, not gone): the crawl cannot safely give its hosts to others."""
        deadline = time.monotonic() + FENCE_PATIENCE
        while (left := view.fence()) > 0:
            if time.monotonic() > deadline:
                raise UserError(f"agent {view.view} died, but a fetch actor of it still renews its lease after "
                                f"{FENCE_PATIENCE:.0f} s: stop the processes of its node (ray stop there), then --resume")
            time.sleep(min(left, 1.0))
        return time.time()

    def close(self) -> list[str]:
        """End every agent; what those that could not finish their part said (with ``agent_dir``:
        a store that refused their shards or files, which stay in their directories)."""
        import ray

        # Agents still running (the crawl stops because one failed, or the driver did) end their
        # loops first: closing an agent ends its sieve, which its own loop and the others' still ask.
        running = [m.run for name, m in self.live.items() if name not in self.results and m.run is not None]
        if running:
            for name in self.live:
                self.live[name].actor.stop.remote()
            ray.wait(running, num_returns=len(running), timeout=STOP_WAIT)
        refs = {name: m.actor.close.remote() for name, m in self.live.items()}
        said = []
        for name, ref in refs.items():
            try:
                ray.get(ref, timeout=120)
            except ray.exceptions.RayError as exc:
                if isinstance(error := _said(exc), UserError):
                    said.append(f"agent {name}: {error}")
                    log.warning("%s", said[-1])
                else:
                    log.exception("closing agent %s", name)
        for m in self.live.values():
            ray.kill(m.actor)
        return said


def draining_nodes() -> dict[str, int]:
    """Node id -> deadline (ms, 0: none) of the nodes Ray drains. (A private API of Ray's, which Ray
    Data and Serve read the same way; nothing public tells a drain yet.)"""
    from ray._private.state import state

    return state.get_draining_nodes()


def _said(exc: Exception) -> Exception:
    """A user error an agent raised (a RayTaskError around it), as the one line it says."""
    cause = getattr(exc, "cause", None)
    return UserError(str(cause)) if isinstance(cause, UserError) else exc


def run_agents(settings: Settings, redis_url: str) -> dict[str, Any]:
    """A crawl with several agents (``agents``) or one per node (``elastic``). The driver only
    sets the crawl up, watches and rebalances: the agents share nothing but Redis and each
    other's sieves."""
    lead = Agent(settings, redis_url, name=AGENT0)
    begin(lead.out, lead.f, lead.s)  # clear or recover the Redis state once, for every agent
    # (a resumed run's agents are named afresh: the shards the last run's agents still held are orphans)
    if settings.resume and settings.agent_dir is not None and (orphaned := orphan_holders(lead.f)):
        log.warning("resuming: shards %s are taken over from their checkpoints and logs", orphaned)
    m = Membership(settings, redis_url)
    started = time.time()
    try:
        m.start()
        m.watch()
    finally:
        unfinished = m.close()
    elapsed = time.time() - started
    per_agent = [m.results[n] for n in sorted(m.results, key=lambda n: int(n[5:]))]
    ended = [r["stopped"] for r in per_agent if r["stopped"] not in ("died", "left")]
    stopped = ("frontier empty" if ended and all(s == "frontier empty" for s in ended)
               else next((s for s in ("interrupted", "stopped") if s in ended), "budget spent"))
    report = build_report(m.f.stats(), elapsed=elapsed, run_pages=sum(r["pages"] for r in per_agent),
                          stopped=stopped, frontier=m.f.counts(),
                          extra={"agents": per_agent, "membership": m.events, "pass": m.f.epoch()})
    write_report(layout(Path(settings.out)).report, report)
    if unfinished:  # the crawl is not whole anywhere a reader looks: say so, --resume finishes it
        raise UserError(f"{unfinished[0]}; --resume once it answers finishes the upload")
    return report
