"""The operator's control plane: commands to a running crawl, kept in its Redis.

``raycrawl ctl`` (and the console's REST API) write here; every agent and fetch actor reads the
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
import re
import time
from dataclasses import dataclass, field

import redis

from raycrawl.errors import UserError
from raycrawl.scope_rules import surt_prefix
from raycrawl.storage.redis_frontier import Keys
from raycrawl.urls import canonicalize

REFRESH = 1.0
"""Seconds between a reader's checks of the control state's version (one Redis round trip)."""
KINDS = ("block", "throttle", "budget", "allow", "deny")
SEEDS_PER_TAKE = 1000
HOST_RE = re.compile(r"[a-z0-9]([a-z0-9\-_]*[a-z0-9])?(\.[a-z0-9]([a-z0-9\-_]*[a-z0-9])?)*\.?")


def target_of(text: str) -> str:
    """A command's target in stored form: ``host:<name>`` for a server name, ``surt:<prefix>``
    for a SURT prefix or a URL (one line of :class:`UserError` when it is neither)."""
    t = text.strip()
    if HOST_RE.fullmatch(t.lower()) and "," not in t:
        return "host:" + t.lower().rstrip(".")
    return "surt:" + surt_prefix(t)


def regex_of(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise UserError(f"scope: {text!r} is not a regular expression ({exc})") from None
    return text


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

    # --- commands -----------------------------------------------------------------------------------
    def command(self, verb: str, args: list[str], who: str) -> str:
        """Apply one operator command (validated first: bad input changes nothing); returns what
        was done, in one line."""
        verb = verb.lower()
        if verb in ("pause", "resume", "stop"):
            if args:
                raise UserError(f"{verb} takes no arguments")
            return self._switch(verb, who)
        if verb == "seeds":
            return self._seeds(args, who)
        if verb in ("block", "unblock"):
            if not args:
                raise UserError(f"{verb}: give one or more hosts or SURT prefixes")
            targets = [target_of(a) for a in args]
            return self._rules(verb, [("block " + t, 1 if verb == "block" else None) for t in targets], who)
        if verb in ("throttle", "budget"):
            if len(args) != 2:
                raise UserError(f"{verb}: give HOST|SURT and a {'delay in seconds' if verb == 'throttle' else 'page count'}"
                                " ('off' removes it)")
            return self._rules(verb, [(f"{verb} {target_of(args[0])}", _number(verb, args[1]))], who)
        if verb == "scope":
            if len(args) != 2 or args[0] not in ("allow", "deny", "remove"):
                raise UserError("scope: give allow|deny|remove and a regular expression or a SURT prefix "
                                "(surt:org,example,)")
            action, rule = args
            rule = ("surt:" + surt_prefix(rule[5:])) if rule.startswith("surt:") else "re:" + regex_of(rule)
            if action == "remove":
                return self._rules(verb, [(f"{kind} {rule}", None) for kind in ("allow", "deny")], who)
            return self._rules(verb, [(f"{action} {rule}", 1)], who)
        raise UserError(f"unknown command {verb!r}: pause, resume, stop, seeds add, block, unblock, throttle, "
                        "budget, scope, show")

    def _switch(self, verb: str, who: str) -> str:
        pipe = self.r.pipeline(transaction=True)
        if verb == "stop":
            pipe.hset(self.k.ctl, "stop", 1)
        else:
            pipe.hset(self.k.ctl, "paused", 1 if verb == "pause" else 0)
        self._logged(pipe, verb, "", who)
        pipe.execute()
        return {"pause": "paused", "resume": "resumed", "stop": "stopping"}[verb]

    def _seeds(self, args: list[str], who: str) -> str:
        if not args or args[0] != "add" or len(args) < 2:
            raise UserError("seeds: give 'add' and URLs, or a file of URLs")
        from pathlib import Path

        from raycrawl.seeds import seed_lines

        raw: list[str] = []
        for a in args[1:]:
            p = Path(a)
            raw += seed_lines(p) if "://" not in a and p.is_file() else [a]
        urls = []
        for u in raw:
            c = canonicalize(u)
            if c is None or not c.startswith(("http://", "https://")):
                raise UserError(f"seeds add: {u!r} is not an http(s) URL")
            urls.append(c)
        pipe = self.r.pipeline(transaction=True)
        pipe.rpush(self.k.ctl_seeds, *urls)
        self._logged(pipe, "seeds add", f"{len(urls)} URLs", who)
        pipe.execute()
        return f"{len(urls)} seeds queued"

    def _rules(self, verb: str, changes: list[tuple[str, object]], who: str) -> str:
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


def _number(verb: str, text: str) -> float | int | None:
    if text.lower() == "off":
        return None
    try:
        value = float(text) if verb == "throttle" else int(text)
    except ValueError:
        raise UserError(f"{verb}: {text!r} is not a number") from None
    if value < 0 or value != value or value == float("inf"):
        raise UserError(f"{verb}: {text!r} must be a finite number ≥ 0")
    return value


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
