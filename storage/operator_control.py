"""The operator's control plane: commands to a running crawl, kept in its Redis.

``raycrawl ctl`` (and the console's REST API) write here, through the verbs of
storage/operator_verbs.py; every agent and fetch actor reads the
state back within :data:`REFRESH` seconds (a changed ``version`` triggers a reload). Being in Redis,
the state is as durable as the frontier (AOF): a crawl killed while paused resumes paused, a
blocked host stays blocked. Each command is appended to a stream, which the crawl's driver copies
to ``OUT/operator.log`` (who, when, what).

Targets: a server name (``a.example``: that name on every scheme and port, as politeness counts
servers) or a SURT prefix / URL as the scope rules take them (``org,example,`` = the host and its
subdomains; ``http://example.org/private/`` = a path): core/scope_rules.py.
"""

from __future__ import annotations

import json
import time
import weakref
from dataclasses import dataclass, field

import redis

from raycrawl.storage.redis_frontier import Keys

REFRESH = 1.0
"""Seconds between a reader's checks of the control state's version (one Redis round trip)."""
SEEDS_PER_TAKE = 1000


@dataclass
class ControlState:
    """One reading of the control plane (what policies/operator_policy.py evaluates)."""

    version: int = 0
    paused: bool = False
    stop: bool = False
    rules: dict[str, dict] = field(default_factory=dict)
    """"<kind> <target>" → {"value": …, "who": …, "at": …}."""

    def of_kind(self, kind: str) -> dict[str, dict]:
        return {k.split(" ", 1)[1]: v for k, v in self.rules.items() if k.split(" ", 1)[0] == kind}


class Control:
    """The control plane of the crawl whose frontier lives under ``prefix`` in ``client``."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.r, self.k = client, Keys(prefix)

    # --- reading ------------------------------------------------------------------------------------
    def version(self) -> int:
        return int(self.r.hget(self.k.ctl, "version") or 0)

    def read(self) -> ControlState:
        pipe = self.r.pipeline(transaction=True)
        pipe.hgetall(self.k.ctl)
        pipe.hgetall(self.k.ctl_rules)
        switches, rules = pipe.execute()
        sw = {k.decode(): v.decode() for k, v in switches.items()}
        return ControlState(int(sw.get("version", 0)), sw.get("paused") == "1", sw.get("stop") == "1",
                            {k.decode(): json.loads(v) for k, v in rules.items()})

    def peek_seeds(self, n: int = SEEDS_PER_TAKE) -> list[str]:
        """The first seeds the operator added that no agent took yet (one reader: the lead agent)."""
        return [u.decode() for u in self.r.lrange(self.k.ctl_seeds, 0, n - 1)]

    def drop_seeds(self, n: int) -> None:
        """The first ``n`` seeds are durable in their sieves: off the queue."""
        self.r.ltrim(self.k.ctl_seeds, n, -1)

    def log_since(self, last: str = "0-0", n: int = 1000) -> list[tuple[str, dict[str, str]]]:
        """Operator commands after stream id ``last``: (id, fields)."""
        rows = self.r.xrange(self.k.ctl_log, min=f"({last}" if last != "0-0" else "-", count=n)
        return [(i.decode(), {k.decode(): v.decode() for k, v in f.items()}) for i, f in rows]

    def spend(self, server: str) -> int:
        """Count one page against ``server``'s budget; the pages counted so far."""
        return int(self.r.hincrby(self.k.ctl_spent, server, 1))

    def state(self) -> dict:
        """The switches and overrides in force, as ``ctl show`` and ``raycrawl status`` print them."""
        state = self.read()
        return {"paused": state.paused, "stop": state.stop,
                "rules": {k: {"value": v["value"], "who": v["who"], "at": v["at"]} for k, v in sorted(state.rules.items())}}

    # --- writing (storage/operator_verbs.py validates and calls these) ------------------------------
    def switch(self, verb: str, who: str) -> str:
        """``pause``, ``resume`` or ``stop``."""
        pipe = self.r.pipeline(transaction=True)
        if verb == "stop":
            pipe.hset(self.k.ctl, "stop", 1)
        else:
            pipe.hset(self.k.ctl, "paused", 1 if verb == "pause" else 0)
        self._logged(pipe, verb, "", who)
        pipe.execute()
        return {"pause": "paused", "resume": "resumed", "stop": "stopping"}[verb]

    def queue_seeds(self, urls: list[str], who: str) -> str:
        """Canonical http(s) URLs, queued for the lead agent."""
        pipe = self.r.pipeline(transaction=True)
        pipe.rpush(self.k.ctl_seeds, *urls)
        self._logged(pipe, "seeds add", f"{len(urls)} URLs", who)
        pipe.execute()
        return f"{len(urls)} seeds queued"

    def set_rules(self, verb: str, changes: list[tuple[str, object]], who: str) -> str:
        """``"<kind> <target>"`` → value (None: removed), logged as ``verb``."""
        pipe = self.r.pipeline(transaction=True)
        for key, value in changes:
            if value is None:
                pipe.hdel(self.k.ctl_rules, key)
            else:
                pipe.hset(self.k.ctl_rules, key, json.dumps({"value": value, "who": who, "at": time.time()}))
            if key.startswith("budget "):
                pipe.hdel(self.k.ctl_spent, key.split(" ", 1)[1])  # a new budget counts from now
        what = "; ".join(f"{k}={v}" if v is not None else f"{k} removed" for k, v in changes)
        self._logged(pipe, verb, what, who)
        pipe.execute()
        return what

    def _logged(self, pipe: redis.client.Pipeline, verb: str, what: str, who: str) -> None:
        pipe.hincrby(self.k.ctl, "version", 1)
        pipe.xadd(self.k.ctl_log, {"at": f"{time.time():.3f}", "who": who or "-", "verb": verb, "what": what})

    def clear_stop(self) -> None:
        """A new run of the crawl (``--resume``) starts without the last run's stop request."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hdel(self.k.ctl, "stop")
        pipe.hincrby(self.k.ctl, "version", 1)
        pipe.execute()


class ControlView:
    """A reader's cached view of the control plane: re-read when its version changed, checked at
    most every :data:`REFRESH` seconds. ``policy`` evaluates it (policies/operator_policy.py)."""

    def __init__(self, control: Control, refresh: float = REFRESH) -> None:
        from raycrawl.policies.operator_policy import OperatorPolicy

        self.control, self.refresh = control, refresh
        self._policy_of = OperatorPolicy
        self.state = ControlState()
        self.policy = OperatorPolicy(self.state)
        self.checked = float("-inf")

    def current(self):  # noqa: ANN201 - an OperatorPolicy
        now = time.monotonic()
        if now - self.checked >= self.refresh:
            self.checked = now
            if self.control.version() != self.state.version:
                self.state = self.control.read()
                self.policy = self._policy_of(self.state)
        return self.policy


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def control_view(frontier) -> ControlView:  # noqa: ANN001 - a RedisFrontier
    """The process's view of the control plane of ``frontier``'s crawl: one per frontier, so that
    the fetch loop and the operator stage's checks (or the agent's stage and its inbox) share one
    cache and one version read per second."""
    if frontier not in _VIEWS:
        _VIEWS[frontier] = ControlView(Control(frontier.r, frontier.p))
    return _VIEWS[frontier]
