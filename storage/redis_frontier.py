"""The workbench's storage in Redis: key layout and the Lua scripts that move URLs atomically.

Keys (all under a prefix ``P``, default ``rc:``; ``V`` = ``P v:<agent>:`` is one agent's *view*):

==================== ======= =====================================================================
key                  type    content
==================== ======= =====================================================================
``P vs:<host>``      list    the visit state's FIFO of entries; host = a server, the host name
                             whatever the scheme and port; an entry = path+query behind its
                             origin's tag (``/x``, ``s/x`` for https, ``s:8443/x``…:
                             core/servers.py), or a robots.txt marker (``s!robots…``)
``P hostip``         hash    host → IPv4 address it is fetched from (fixed at first add)
``P hnext``          hash    host → UNIX time its next request may start
``P cdelay``         hash    host → robots.txt Crawl-delay (seconds, already capped)
``P inext``          hash    IP → UNIX time its next request may start (only moves forward)
``P howner``         hash    host → the view (``V``) of the agent that owns it (fixed at first add)
``P views``          set     every agent's view prefix ``V``
``P soff:<queue>``   string  byte offset of a sieve output queue already distributed (queue =
                             level × 64 + shard: policies/front_queues.py; level 0 = the shard)
``P shards``         hash    shard → agent that owns it (actors/cluster/membership.py; absent: agent0)
``P shome``          hash    shard → where its sieve and virtual queues are, with ``agent_dir``:
                             ``store`` or the holder ``agent@host:dir`` (storage/shard_handoff.py)
``P sckpt``          hash    shard → its last checkpoint in the object store, with ``agent_dir``:
                             a JSON object, store key → bytes (storage/shard_handoff.py)
``P slog:<shard>``   list    what changed in the shard since that checkpoint (storage/shard_log.py)
``P commit:<token>`` string  a commit already applied (10 minutes: retried commits apply once)
``V ent:<ip>``       zset    workbench entry of an IP in one view: the agent's idle hosts on that IP
                             with URLs, scored by hnext
``V wb``             zset    the agent's workbench: IPs with a non-empty entry in this view, scored by
                             max(inext, smallest hnext in the entry) = when it becomes ready
``V active``         set     the agent's hosts whose visit state is non-empty (its front, in BUbiNG's terms)
``V virt``           hash    host → URLs of the agent's host waiting in the virtualizer
``V lease``          string  until when (Redis's clock, UNIX seconds) the agent's fetch actors may
                             start requests: renewed by each every 2 s (actors/cluster/lease.py)
``V fenced``         string  when the agent was declared departed (its lease had lapsed): its
                             lease is never renewed again, and its acquire, borrow, release and
                             commit change nothing (lua/fence.lua)
``P hbusy``          hash    host → IP, hosts with a request in flight
``P borrowed``       hash    host → view ``V`` that borrowed it for one robots.txt redirect hop
``P ibusy``          set     IPs with a request in flight (by any agent)
``P inflight``       hash    "<host> <entry>" → host, acquired but not yet committed (re-queued by
                             recover)
``P failing``        hash    URL → ``V<tab>kind``: a failure (DNS, forbidden network) view ``V`` is
                             recording, from the distributor step that took it from the sieve to
                             the commit of its record; ``<tab>kind``: an orphan, its agent dead or
                             the crawl crashed, for any agent to claim and record
                             (storage/crawl_check.py counts them as in flight)
``P queued``         string  number of paths in all visit states
``P hcount``         hash    host → URLs ever scheduled (for max-urls-per-host; in a periodic crawl,
                             in the current pass)
``P voff``           hash    host → byte offset already read from its virtual queue
``P vend``           hash    host → committed end (bytes) of its virtual queue
``P stats``          hash    crawl counters (pages, statuses, errors…; see raycrawl.report)
``P robots``         hash    origin (``scheme://name[:port]``) → robots.txt rules (JSON of
                             RobotsRules.to_dict), until expiry
``P meta``           hash    started, settings, crawl_id, layout (:data:`LAYOUT`) of the crawl; unconfirmed: URLs fetched
                             but never committed, as of the last resume (storage/crawl_check.py);
                             epoch: the current pass of a periodic crawl, pass_pages: pages
                             committed before it began (its budget counts from there)
``P prior``          hash    URL → its last capture (JSON of storage.crawl_epochs.Capture) for the
                             URLs the current pass revisits: the validators of the conditional GET
``P activity``       string  commits so far (bumped by every commit: distributed termination)
``P idle``           hash    agent → activity value at which it last saw itself idle, or "done"
``P alive:<name>``   string  a heartbeat (the crawl's driver: ``driver``): Redis's time, set every 2 s
                             while the crawl runs (actors/cluster/heartbeat.py): ``raycrawl status`` tells
                             a running crawl from a stopped one an external Redis keeps
``P spamblocked``    hash    host → score, hosts the crawl-time spam gate blocked: fetch actors
                             visit none of their queued URLs any more (policies/spam_gate.py)
``P ctl``            hash    the operator's switches: ``paused`` (1: no new fetches), ``stop`` (1: the
                             crawl stops as on Ctrl-C), ``version`` (bumped by every change)
``P ctl:rules``      hash    "<kind> <target>" → JSON, the operator's overrides: block, throttle,
                             budget, scope allow/deny (storage/operator_control.py)
``P ctl:spent``      hash    server → pages fetched since its budget was set
``P ctl:seeds``      list    seeds the operator added, not yet taken by an agent
``P ctl:log``        stream  every operator command (when, who, what): ``OUT/operator.log``
``P rask:<agent>``   list    "ASKER URL": requisites of ASKER's waiting renders on hosts ``agent`` owns
                             (actors/visit/render_handover.py)
``P rinbox:<agent>`` list    responses other agents hand ``agent``'s renders (JSON head, newline, body)
==================== ======= =====================================================================

Invariants the scripts keep: a host is in at most one of {``hbusy``, its owner's ``ent:<ip>``}; a
host in an entry has a non-empty visit state; a view's ``wb`` holds only IPs with a non-empty entry
in that view; ``acquire`` takes an IP only when it is not in ``ibusy``, and every ``release``
re-scores the IP in each view with an entry for it. Hence a host, and an IP, has at most one
request in flight across all agents, and an IP's next-fetch time (``inext``) is shared by the
agents whose hosts live on it — IP politeness holds across agents (BUbiNG's issue #8).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import redis

from raycrawl.errors import UserError
from raycrawl.storage.lua_script import LuaScript

if TYPE_CHECKING:
    from raycrawl.storage.capture import Capture

log = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")
# Shared Lua functions (``lua/_<name>.lua``) prepended to the scripts that use them.
FRAGMENTS = {"recover": ("_delay",), "recover_view": ("_delay",)}


LAYOUT = "2"
"""How the frontier keys its state (``P meta`` ``layout``): "2", visit states per server name with
origin-tagged entries (core/servers.py); absent, an older raycrawl's, per ``scheme://host[:port]``
— its Redis keys and sieve shards are not this version's, and ``--resume`` refuses it."""

DURABLE_PATIENCE = 30.0
"""Seconds a commit waits for Redis to fsync its AOF before the crawl stops."""


class Fenced(UserError):
    """This agent was declared departed (its lease lapsed) and its work given to others: it stops."""


class RedisNotDurable(UserError):
    """Redis cannot make its AOF durable (the crawl must stop: commits would not survive a crash)."""


class Acquired(NamedTuple):
    """A visit :meth:`RedisFrontier.acquire` handed out: its server, the server's IP, the visit-state entry."""

    host: str
    ip: str
    entry: str


class Released(NamedTuple):
    """A server handed back (:meth:`RedisFrontier.release`): when it and its IP may be fetched
    again (negative: as stored), and the entries that go back to the front of its visit state."""

    host: str
    ip: str
    host_next: float
    ip_next: float
    putback: list[str] | tuple[str, ...]


class Group(NamedTuple):
    """Entries for one server's visit state (:meth:`RedisFrontier.add`)."""

    host: str
    ip: str
    paths: list[str]


class Keys:
    """The key names of the table above for prefix ``P`` and view ``V``: the one place in Python
    that spells them (the Lua scripts build the same names from the prefixes they are given)."""

    def __init__(self, p: str, v: str = "") -> None:
        self.hostip, self.hnext, self.cdelay, self.inext = p + "hostip", p + "hnext", p + "cdelay", p + "inext"
        self.howner, self.views, self.shards = p + "howner", p + "views", p + "shards"
        self.hbusy, self.borrowed, self.ibusy = p + "hbusy", p + "borrowed", p + "ibusy"
        self.inflight, self.failing, self.queued, self.hcount = p + "inflight", p + "failing", p + "queued", p + "hcount"
        self.voff, self.vend, self.stats, self.robots = p + "voff", p + "vend", p + "stats", p + "robots"
        self.meta, self.activity, self.idle, self.alive = p + "meta", p + "activity", p + "idle", p + "alive:"
        self.sieve_offset_prefix, self.spam_blocked = p + "soff:", p + "spamblocked"
        self.prior = p + "prior"
        self.ctl, self.ctl_rules, self.ctl_spent = p + "ctl", p + "ctl:rules", p + "ctl:spent"
        self.ctl_seeds, self.ctl_log = p + "ctl:seeds", p + "ctl:log"
        self.render_ask, self.render_inbox = p + "rask:", p + "rinbox:"
        self.virt, self.active, self.wb = v + "virt", v + "active", v + "wb"  # this view's
        self._vs, self._ent = p + "vs:", v + "ent:"

    def visit_state(self, host: str) -> str:
        return self._vs + host

    def entry(self, ip: str) -> str:
        """This view's workbench entry of ``ip``."""
        return self._ent + ip

    def sieve_offset(self, shard: int) -> str:
        return f"{self.sieve_offset_prefix}{shard}"


class RedisFrontier:
    """Thin typed wrapper over the Lua scripts; one Redis connection (synchronous)."""

    def __init__(self, client: redis.Redis, prefix: str = "rc:", view: str = "agent0", register: bool = True) -> None:
        self.r = client
        self.p = prefix
        self.view = view
        self.v = self.view_prefix(view)
        self.k = Keys(prefix, self.v)
        self.more: set[str] = set()  # of the last acquire: hosts whose visit states hold more URLs
        self._scripts = {
            name: LuaScript(client, "".join((LUA_DIR / f"{part}.lua").read_text()
                                            for part in (*FRAGMENTS.get(name, ()), name)))
            for name in ("acquire", "release", "add", "recover", "recover_view", "move", "commit", "borrow",
                         "lease", "fence", "claim_failing", "orphan_failing", "checkpoint")
        }
        if register:
            self.register()

    def key(self, name: str) -> str:
        return self.p + name

    def view_prefix(self, agent: str) -> str:
        """``V``: the prefix of ``agent``'s view keys."""
        return f"{self.p}v:{agent}:"

    def view_agent(self, view_prefix: str) -> str:
        """The agent whose view prefix this is (inverse of :meth:`view_prefix`)."""
        return view_prefix[len(self.p) + 2:-1]

    def vkey(self, name: str) -> str:
        """A key of this agent's view."""
        return self.v + name

    def register(self, agents: list[str] | None = None) -> None:
        """Make this view (or ``agents``' views) known to release/recover (idempotent; again
        after :meth:`clear`)."""
        self.r.sadd(self.key("views"), *([self.view_prefix(a) for a in agents] if agents else [self.v]))

    def views(self) -> list[str]:
        return sorted(v.decode() for v in self.r.smembers(self.key("views")))

    def acquire(self, now: float, n: int) -> tuple[list[Acquired], float | None]:
        """Up to ``n`` visits ready at ``now`` (distinct hosts, distinct IPs), marked
        busy and in flight; and the earliest time something else becomes ready (None if none)."""
        return self._acquired(self._scripts["acquire"](args=[self.p, self.v, repr(now), n]))

    def release_and_acquire(self, items: list[Released], now: float, n: int) -> tuple[list[Acquired], float | None]:
        """:meth:`release` ``items`` (if any), then :meth:`acquire`, in one round trip (one
        pipeline, no transaction: each script is atomic, as when sent apart)."""
        if not items:
            return self.acquire(now, n)
        pipe = self.r.pipeline(transaction=False)
        self.release(items, pipe)
        self._scripts["acquire"](args=[self.p, self.v, repr(now), n], client=pipe)
        return self._acquired(pipe.execute()[-1])

    def _acquired(self, raw: list) -> tuple[list[Acquired], float | None]:
        earliest = float(raw[-1])
        items = [Acquired(raw[i].decode(), raw[i + 1].decode(), raw[i + 2].decode()) for i in range(0, len(raw) - 1, 4)]
        # Hosts with more URLs in their visit states: a fetcher keeps the connection to these.
        self.more = {raw[i].decode() for i in range(0, len(raw) - 1, 4) if int(raw[i + 3]) > 0}
        return items, (None if earliest < 0 else earliest)

    def borrow(self, host: str, ip: str, held_ip: str, now: float) -> float | None:
        """Take ``host`` (on ``ip``) busy for one request outside its visit state, as acquire would
        (``held_ip``: the IP the caller already holds); None when taken — hand it back with
        :meth:`release` — else when to try again."""
        at = float(self._scripts["borrow"](args=[self.p, host, ip, held_ip, repr(now), self.v]))
        return None if at < 0 else at

    def release(self, items: list[Released], pipe: redis.client.Pipeline | None = None) -> list[int]:
        """Release the hosts taken by :meth:`acquire`; a negative time
        keeps the stored one; ``putback`` paths return to the front of the visit state. A host not
        busy (a release retried after a Redis restart) is skipped. Returns each host's remaining
        queue length (-1 if skipped)."""
        if not items:
            return []
        args: list[object] = [self.p, self.v]
        for host, ip, hn, ipn, back in items:
            args += [host, ip, repr(float(hn)), repr(float(ipn)), len(back), *back]
        return self._scripts["release"](args=args, client=pipe or self.r)

    def add(self, groups: list[Group], front: bool = False, pipe: redis.client.Pipeline | None = None) -> int:
        """Append (prepend if ``front``) paths to visit states, a group per host."""
        args: list[object] = [self.p, self.v, "1" if front else "0"]
        for host, ip, paths in groups:
            args += [host, ip, len(paths), *paths]
        return self._scripts["add"](args=args, client=pipe or self.r)

    def recover(self, now: float, host_delay: float, ip_delay: float) -> int:
        """Re-queue every in-flight URL and rebuild the workbench (after a crash); every host and IP
        waits a full delay from ``now``, since a kill -9 may have lost the last second of next-fetch
        times (AOF everysec). Returns how many URLs were re-queued."""
        args = [self.p, repr(now), repr(host_delay), repr(ip_delay)]
        return int(self._scripts["recover"](args=args))

    def recover_view(self, now: float, host_delay: float, ip_delay: float) -> int:
        """This agent's fetch actors died: its in-flight URLs back in front of their visit states,
        their hosts and IPs freed and delayed a full delay from ``now``. Only when no live fetcher
        of the view has anything in flight. Returns how many URLs were put back."""
        return int(self._scripts["recover_view"](args=[self.p, self.v, repr(now), repr(host_delay), repr(ip_delay)]))

    def commit(self, urls: list[str], counters: dict[str, int], token: str | None = None, *,
               by_view: bool = True) -> bool:
        """Forget in-flight URLs whose results are stored, and add to the crawl counters, atomically
        and once (``token``: retries of one commit apply once); then wait for the AOF to reach the
        disk so a kill -9 cannot roll the commit back. Returns False for a repeat. ``by_view``: the
        commit is this view's, refused (:class:`Fenced`) once the view is fenced; the driver's own
        counters are not."""
        import uuid

        args: list[object] = [self.p, self.v if by_view else "", token or uuid.uuid4().hex, len(urls), *urls]
        for name, n in counters.items():
            if n:
                args += [name, int(n)]
        applied = int(self._scripts["commit"](args=args))
        if applied < 0:
            raise Fenced(f"agent {self.view} was declared departed (its lease lapsed); its fetches were "
                         "put back for the other agents")
        self.wait_durable()
        return applied == 1

    # --- leases (actors/cluster/lease.py) --------------------------------------------------------------------
    def renew_lease(self, ttl: float) -> bool:
        """Extend this view's lease to Redis's now + ``ttl``; False once the view is fenced."""
        return bool(self._scripts["lease"](args=[self.v, repr(ttl)]))

    def fence(self) -> float:
        """Declare this view's agent departed if its lease has lapsed: 0.0 when fenced (now or
        before), else the seconds its lease still runs (nothing changed)."""
        return float(self._scripts["fence"](args=[self.v]))

    def lease_lapsed(self) -> float | None:
        """Seconds since this view's lease ran out by Redis's clock; None while it runs or if it
        never ran (an agent whose fetch actors have not started yet)."""
        lease = float(self.r.get(self.v + "lease") or 0)
        if not lease:
            return None
        secs, micros = self.r.time()
        lapsed = secs + micros / 1e6 - lease
        return lapsed if lapsed > 0 else None

    def clear_fences(self) -> None:
        """A new run (``--resume``) names its agents afresh: the last run's leases and fences go."""
        keys = [v + k for v in self.views() for k in ("lease", "fenced")]
        keys += [k for k in self.r.scan_iter(match=self.p + "v:*:fenced", count=1000)]
        if keys:
            self.r.delete(*keys)

    def wait_durable(self, patience: float = DURABLE_PATIENCE) -> None:
        """Return once the AOF holding everything written so far is on disk (WAITAOF's answer is
        checked: a server that cannot fsync — a full or failing disk — is retried for ``patience``
        seconds, then a RedisNotDurable stops the crawl; what is not durable is redone on --resume)."""
        import time

        deadline = time.monotonic() + patience
        while True:
            try:
                local, _ = self.r.execute_command("WAITAOF", 1, 0, 1000)
            except redis.ResponseError:
                return  # AOF off (an external Redis configured so): nothing to wait for
            if int(local) >= 1:
                return
            if time.monotonic() > deadline:
                raise RedisNotDurable(f"Redis has not written its AOF to disk for {patience:.0f} s "
                                      "(disk full or failing?); stopped: free space, then --resume")
            log.warning("Redis AOF not on disk yet (WAITAOF 0): waiting")

    # --- the crawl's identity, failures, duplicates and termination marks --------------------------

    def has_crawl(self) -> bool:
        return bool(self.r.exists(self.k.meta))

    def meta(self) -> dict[str, str]:
        """started, settings, crawl_id (and unconfirmed after a resume) of the crawl; {} if none."""
        return {k.decode(): v.decode() for k, v in self.r.hgetall(self.k.meta).items()}

    def start_crawl(self, crawl_id: str, settings_json: str, now: float) -> None:
        self.r.hset(self.k.meta, mapping={"started": now, "crawl_id": crawl_id, "settings": settings_json,
                                          "layout": LAYOUT})

    # --- the passes of a periodic crawl (storage/crawl_epochs.py) ---------------------------------------
    def epoch(self) -> int:
        """The current pass (0: the first crawl)."""
        return int(self.r.hget(self.k.meta, "epoch") or 0)

    def pass_pages(self) -> int:
        """Pages committed in the current pass (the pass's own budget counts these)."""
        return self.stats().get("pages", 0) - int(self.r.hget(self.k.meta, "pass_pages") or 0)

    def begin_pass(self, epoch: int, priors: dict[str, Capture], batch: int = 5000) -> None:
        """Make ``epoch`` the current pass, with the last captures of the URLs it revisits; the
        per-host scheduling counts (``max_urls_per_host``) start again."""
        self.r.delete(self.k.prior, self.k.hcount)
        items = [(url, capture.encode()) for url, capture in priors.items()]
        for i in range(0, len(items), batch):
            self.r.hset(self.k.prior, mapping=dict(items[i : i + batch]))
        self.r.hset(self.k.meta, mapping={"epoch": epoch, "pass_pages": self.stats().get("pages", 0)})

    def priors(self, urls: list[str]) -> list[Capture | None]:
        """The last capture of each URL the current pass revisits; None for the others."""
        from raycrawl.storage.capture import Capture

        return [None if raw is None else Capture.decode(raw) for raw in self.r.hmget(self.k.prior, urls)] if urls else []

    def confirm_resume(self, unconfirmed: int) -> None:
        """The resume goes ahead: ``unconfirmed`` URLs fetched but never committed are allowed to be
        fetched again; failures being recorded at the stop are among them (recorded again:
        :meth:`orphan_failing`)."""
        self.r.hset(self.k.meta, "unconfirmed", unconfirmed)

    def consent_refetch(self, unconfirmed: int) -> None:
        """The user accepts fetching ``unconfirmed`` archived URLs again (raycrawl check --repair)."""
        self.r.hset(self.k.meta, "unconfirmed", unconfirmed)

    def uncommitted(self) -> tuple[int, int]:
        """(URLs in flight or failing, URLs accepted as fetched-not-committed at the last resume)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.hlen(self.k.inflight)
        pipe.hlen(self.k.failing)
        pipe.hget(self.k.meta, "unconfirmed")
        inflight, failing, unconfirmed = pipe.execute()
        return int(inflight) + int(failing), int(unconfirmed or 0)

    def note_failing(self, failed: list[tuple[str, str]], pipe: redis.client.Pipeline | None = None) -> None:
        """(URL, error kind): failures this view is about to record, in flight until the commit of
        their records (which forgets them: commit.lua)."""
        if failed:
            (pipe or self.r).hset(self.k.failing, mapping={u: f"{self.v}\t{kind}" for u, kind in failed})

    def orphan_failing(self, every_view: bool = False) -> int:
        """The failures this view (``every_view``: any view, a resumed crawl) was recording have no
        one to record them: orphans, for :meth:`claim_failing`. Returns how many."""
        return int(self._scripts["orphan_failing"](args=[self.p, "" if every_view else self.v]))

    def claim_failing(self, n: int) -> list[tuple[str, str]]:
        """Up to ``n`` orphan failures, (URL, kind), now this view's to record."""
        raw = self._scripts["claim_failing"](args=[self.p, self.v, n])
        return [(raw[i].decode(), raw[i + 1].decode()) for i in range(0, len(raw), 2)]

    def activity(self) -> bytes:
        """The commit counter (distributed termination: see actors/cluster/agent.py ``_all_idle``)."""
        return self.r.get(self.k.activity) or b"0"

    def mark_idle(self, agent: str, mark: bytes | str) -> None:
        """``agent`` saw itself idle at activity ``mark``, or is ``done`` (its budget spent)."""
        self.r.hset(self.k.idle, agent, mark)

    def idle_marks(self, agents: list[str]) -> list[bytes | None]:
        return self.r.hmget(self.k.idle, agents)

    def beat(self, name: str) -> None:
        """``name`` runs now: the time by Redis's clock (one clock for every machine), in a key
        without expiry — an expiring key would have Redis append its deletion to the AOF after a
        restart, and a refused --resume must leave the crawl's files as they were."""
        sec, usec = self.r.time()
        self.r.set(self.k.alive + name, f"{sec}.{usec:06d}")

    def stop_beating(self, name: str) -> None:
        self.r.delete(self.k.alive + name)

    def alive(self, within: float) -> list[str]:
        """The names that beat within the last ``within`` seconds (by Redis's clock)."""
        keys = sorted(self.r.scan_iter(match=self.k.alive + "*", count=1000))
        if not keys:
            return []
        sec, usec = self.r.time()
        now, n = sec + usec / 1e6, len(self.k.alive)
        return [k.decode()[n:] for k, t in zip(keys, self.r.mget(keys), strict=True)
                if t is not None and now - float(t) < within]

    def clear_idle(self) -> None:
        """Forget the termination marks (a resume or a membership change starts them over)."""
        self.r.delete(self.k.idle)

    def robots_rules(self, host: str) -> bytes | None:
        """A host's robots.txt rules as stored by :meth:`store_robots` (JSON), if any."""
        return self.r.hget(self.k.robots, host)

    def store_robots(self, host: str, rules_json: str) -> None:
        self.r.hset(self.k.robots, host, rules_json)

    # --- renders' requisites between agents (actors/visit/render_handover.py) ----------------------
    def render_ask(self, asker: str, asks: dict[str, list[str]]) -> None:
        """Ask each agent (the key) for the URLs ``asker``'s renders wait for."""
        pipe = self.r.pipeline(transaction=False)
        for agent, urls in asks.items():
            pipe.rpush(self.k.render_ask + agent, *(f"{asker} {u}" for u in urls))
        pipe.execute()

    def render_asked(self, agent: str, n: int = 1000) -> list[tuple[str, str]]:
        """(asker, URL) asked of ``agent``, taken from its list."""
        return [tuple(x.decode().split(" ", 1)) for x in self.r.lpop(self.k.render_ask + agent, n) or []]

    def render_answer(self, answers: dict[str, list[bytes]]) -> None:
        """Hand each agent (the key) the responses it asked for."""
        pipe = self.r.pipeline(transaction=False)
        for agent, blobs in answers.items():
            pipe.rpush(self.k.render_inbox + agent, *blobs)
        pipe.execute()

    def render_answers(self, agent: str, n: int = 200) -> list[bytes]:
        return self.r.lpop(self.k.render_inbox + agent, n) or []

    def block_spam_hosts(self, scores: dict[str, float]) -> None:
        if scores:
            self.r.hset(self.k.spam_blocked, mapping=scores)

    def spam_blocked(self) -> dict[str, float]:
        """Hosts the spam gate blocked (every agent's), with their scores."""
        return {k.decode(): float(v) for k, v in self.r.hgetall(self.k.spam_blocked).items()}

    def set_crawl_delays(self, delays: dict[str, float]) -> None:
        """Host → robots.txt Crawl-delay, for the waits recover() sets after a crash."""
        self.r.hset(self.k.cdelay, mapping=delays)

    def set_shard_owners(self, shards: dict[int, str]) -> None:
        with self.r.pipeline(transaction=True) as pipe:
            pipe.delete(self.k.shards)
            pipe.hset(self.k.shards, mapping={str(s): a for s, a in shards.items()})
            pipe.execute()

    # --- reads for status, the distributor and tests ---------------------------------------------
    def sieve_offsets(self, shards: list[int], client: redis.Redis | None = None) -> dict[int, int]:
        """Front queue → byte offset of it already distributed (a queue id,
        :func:`policies.front_queues.queue_id`; a shard's level-0 queue has the shard's number)."""
        if not shards:
            return {}
        vals = (client or self.r).mget([self.k.sieve_offset(s) for s in shards])
        return {s: int(v or 0) for s, v in zip(shards, vals, strict=True)}

    def all_sieve_offsets(self) -> dict[int, int]:
        """Every shard's offset that was ever set (a scan: for the consistency check)."""
        prefix = self.k.sieve_offset_prefix
        return {int(k.decode()[len(prefix):]): int(self.r.get(k) or 0)
                for k in self.r.scan_iter(match=prefix + "*", count=1000)}

    def virtual_queue_ends(self) -> list[tuple[str, int]]:
        """(host, committed end of its virtual queue) for every host with one (a scan)."""
        return [(h.decode(), int(e)) for h, e in self.r.hscan_iter(self.k.vend)]

    def shard_owners(self) -> dict[int, str]:
        """The current shard → agent map (empty before the first assignment: agent0 owns all)."""
        return {int(k): v.decode() for k, v in self.r.hgetall(self.key("shards")).items()}

    # --- shard logs and checkpoints (storage/shard_log.py, storage/shard_handoff.py) -------------------
    def shard_log_key(self, shard: int) -> str:
        return f"{self.p}slog:{shard}"

    def log_shards(self, entries: dict[int, list[bytes]]) -> None:
        """Append to shards' logs (one round trip)."""
        pipe = self.r.pipeline(transaction=False)
        for shard, items in entries.items():
            if items:
                pipe.rpush(self.shard_log_key(shard), *items)
        pipe.execute()

    def shard_logs(self, shards: list[int]) -> dict[int, list[bytes]]:
        pipe = self.r.pipeline(transaction=False)
        for shard in shards:
            pipe.lrange(self.shard_log_key(shard), 0, -1)
        return dict(zip(shards, pipe.execute(), strict=True))

    def shard_log_lengths(self, shards: list[int]) -> dict[int, int]:
        pipe = self.r.pipeline(transaction=False)
        for shard in shards:
            pipe.llen(self.shard_log_key(shard))
        return dict(zip(shards, pipe.execute(), strict=True))

    def checkpointed(self, shard: int, manifest: dict[str, int], logged: int | None, home: str = "") -> bool:
        """The state of ``shard`` is in the store under ``manifest``'s keys (key → bytes), with the
        first ``logged`` entries of its log (None: all; the shard was put away), which go; ``home``:
        its new ``P shome`` value, set at once. False (nothing written) once this view is fenced."""
        return bool(self._scripts["checkpoint"](args=[
            self.p, self.v, str(shard), json.dumps(manifest, sort_keys=True, separators=(",", ":")),
            -1 if logged is None else logged, home, self.shard_log_key(shard)]))

    def virtualized_of(self, hosts: list[str]) -> dict[str, int]:
        """host → its URLs waiting in any agent's virtualizer (``V virt`` of every view)."""
        out: dict[str, int] = {}
        for view in self.views() if hosts else []:
            for h, n in zip(hosts, self.r.hmget(view + "virt", hosts), strict=True):
                if n:
                    out[h] = out.get(h, 0) + int(n)
        return out

    def shard_homes(self, shards: list[int] | None = None) -> dict[int, bytes | None]:
        """``P shome``: where each of ``shards`` (None: every shard with a home) is, raw."""
        if shards is None:
            return {int(s): h for s, h in self.r.hgetall(self.key("shome")).items()}
        return dict(zip(shards, self.r.hmget(self.key("shome"), [str(s) for s in shards]), strict=True)) if shards else {}

    def set_shard_homes(self, homes: dict[int, str]) -> None:
        if homes:
            self.r.hset(self.key("shome"), mapping={str(s): h for s, h in homes.items()})

    def checkpointed_shards(self) -> list[int]:
        """The shards with a checkpoint (``P sckpt``)."""
        return sorted(int(s) for s in self.r.hkeys(self.key("sckpt")))

    def checkpoints(self, shards: list[int]) -> dict[int, dict[str, int] | None]:
        """Each shard's last checkpoint (store key → bytes), or None."""
        if not shards:
            return {}
        vals = self.r.hmget(self.key("sckpt"), [str(s) for s in shards])
        return {s: _manifest(s, v) for s, v in zip(shards, vals, strict=True)}

    def fence_key(self, agent: str | None = None) -> str:
        """``V fenced`` of ``agent``'s view (None: this one's): WATCH it with what a step moves."""
        return (self.v if agent is None else self.view_prefix(agent)) + "fenced"

    def is_fenced(self, agent: str | None = None, client=None) -> bool:  # noqa: ANN001 - a client or a watching pipeline
        """``agent`` (None: this view's) was declared departed (fence.lua); ``client``: read through
        it (a pipeline that WATCHes :meth:`fence_key`)."""
        return bool((client or self.r).exists(self.fence_key(agent)))

    def move_hosts(self, moves: list[tuple[str, str]], batch: int = 500) -> int:
        """Give hosts to other agents: (host, agent) pairs; see lua/move.lua."""
        moved = 0
        for i in range(0, len(moves), batch):
            args: list[object] = [self.p]
            for host, agent in moves[i:i + batch]:
                args += [host, self.view_prefix(agent)]
            moved += int(self._scripts["move"](args=args))
        return moved

    def owned_hosts(self) -> list[tuple[str, str]]:
        """Every known host and the agent owning it (a scan: for membership changes only)."""
        return [(h.decode(), self.view_agent(v.decode())) for h, v in self.r.hscan_iter(self.key("howner"), count=2000)]

    def drop_view(self, agent: str) -> None:
        """Forget an agent that left (its hosts were moved away first)."""
        v = self.view_prefix(agent)
        self.r.srem(self.key("views"), v)
        left = self.r.scard(v + "active") + self.r.zcard(v + "wb") + self.r.hlen(v + "virt")
        if left:
            log.error("view %s dropped with %d entries left", v, left)
        self.r.delete(v + "active", v + "wb", v + "virt", self.k.render_ask + agent, self.k.render_inbox + agent)

    def front_size(self) -> int:
        """This agent's hosts with URLs in their visit state."""
        return self.r.scard(self.vkey("active"))

    def in_front(self, hosts: list[str]) -> list[bool]:
        """Whether each host is in this agent's front (has URLs in its visit state)."""
        if not hosts:
            return []
        return [bool(x) for x in self.r.smismember(self.vkey("active"), hosts)]

    def counts(self, view_only: bool = False) -> dict[str, int]:
        """Frontier sizes of the whole crawl (``front``, ``ips_waiting``, ``virtualized`` summed over
        the views), or of this view only (``view_only``: ``queued`` and ``hosts_busy`` stay global)."""
        views = [self.v] if view_only else self.views() or [self.v]
        pipe = self.r.pipeline(transaction=False)
        pipe.get(self.key("queued"))
        pipe.hlen(self.key("hostip"))
        pipe.hlen(self.key("hbusy"))
        pipe.hlen(self.key("inflight"))
        pipe.hlen(self.key("failing"))
        for v in views:
            pipe.zcard(v + "wb")
            pipe.hvals(v + "virt")
            pipe.scard(v + "active")
        queued, hosts, busy, inflight, failing, *per_view = pipe.execute()
        ready_ips, virt, front = per_view[0::3], per_view[1::3], per_view[2::3]
        return {"queued": int(queued or 0), "hosts": hosts, "front": sum(front), "ips_waiting": sum(ready_ips),
                "hosts_busy": busy, "inflight": inflight, "failing": failing,
                "virtualized": sum(int(x) for vals in virt for x in vals), "agents": len(views)}

    def stats(self) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.r.hgetall(self.key("stats")).items()}

    def host_counts(self, hosts: list[str]) -> list[int]:
        if not hosts:
            return []
        return [int(v or 0) for v in self.r.hmget(self.key("hcount"), hosts)]

    def host_ips(self, hosts: list[str]) -> list[str | None]:
        if not hosts:
            return []
        return [v.decode() if v else None for v in self.r.hmget(self.key("hostip"), hosts)]

    def queue_lengths(self, hosts: list[str]) -> list[int]:
        pipe = self.r.pipeline(transaction=False)
        for h in hosts:
            pipe.llen(self.key("vs:") + h)
        return pipe.execute()

    def queue_length(self, host: str) -> int:
        return self.r.llen(self.key("vs:") + host)

    def idle(self) -> bool:
        """No URL in any visit state and nothing in flight (no failure being recorded either)."""
        c = self.counts()
        return c["queued"] == 0 and c["hosts_busy"] == 0 and c["inflight"] == 0 and c["failing"] == 0

    def clear(self) -> None:
        """Delete every key of this crawl (a fresh, non-resumed crawl)."""
        cursor = 0
        while True:
            cursor, keys = self.r.scan(cursor, match=self.p + "*", count=1000)
            keys = [k for k in keys if not k.startswith(self.k.alive.encode())]  # this run's heartbeat
            if keys:
                self.r.delete(*keys)
            if cursor == 0:
                break
        self.register()


def _manifest(shard: int, value: bytes | None) -> dict[str, int] | None:
    """A ``P sckpt`` value; a crawl begun before checkpoints were named by manifest holds
    "FILES BYTES" there, which cannot say which store keys are the shard's."""
    if not value:
        return None
    try:
        manifest = json.loads(value)
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict):
        raise UserError(f"shard {shard}'s checkpoint record in Redis ({value[:40]!r}) is not a list of store keys:"
                        " this crawl was begun by an older raycrawl; finish it with that version, or start anew")
    return manifest
