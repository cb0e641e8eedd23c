"""The operator's verbs, one table: what each takes, what it writes to the control plane, its help.

``raycrawl ctl`` (its parser and ``--help``), the console's REST API and page, and the commands table
of docs/operating.md are all made from :data:`VERBS`; a verb is one :class:`Verb` here plus what it
means to the crawl in policies/operator_policy.py. ``python -m raycrawl.storage.operator_verbs``
prints the docs' table (``tests/test_operator.py`` checks the docs hold it as printed).

Each verb's ``run`` validates all of its arguments before it writes anything (bad input changes
nothing) and returns what it did, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from raycrawl.errors import UserError

if TYPE_CHECKING:  # (every command's parser reads the table: it imports neither redis-py nor surt)
    from raycrawl.storage.operator_control import Control

HOST_RE = re.compile(r"[a-z0-9]([a-z0-9\-_]*[a-z0-9])?(\.[a-z0-9]([a-z0-9\-_]*[a-z0-9])?)*\.?")


@dataclass(frozen=True)
class Verb:
    name: str
    usage: str
    """Its arguments as ``ctl`` shows them ("" when it takes none)."""
    summary: str
    """One line: ``ctl --help``, the console's hint."""
    effect: str
    """What it does to the crawl (docs/operating.md's table)."""
    where: str
    """Which part of the crawl applies it."""
    run: Callable[[Control, list[str], str], str] | None
    """(control, args, who) → what was done; None for a verb that only reads (``show``)."""


def target_of(text: str) -> str:
    """A command's target in stored form: ``host:<name>`` for a server name, ``surt:<prefix>``
    for a SURT prefix or a URL (one line of :class:`UserError` when it is neither)."""
    from raycrawl.scope_rules import surt_prefix

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


def _switch(verb: str) -> Callable[[Control, list[str], str], str]:
    def run(control: Control, args: list[str], who: str) -> str:
        if args:
            raise UserError(f"{verb} takes no arguments")
        return control.switch(verb, who)
    return run


def _seeds(control: Control, args: list[str], who: str) -> str:
    if not args or args[0] != "add" or len(args) < 2:
        raise UserError("seeds: give 'add' and URLs, or a file of URLs")
    from raycrawl.seeds import seed_lines
    from raycrawl.urls import canonicalize

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
    return control.queue_seeds(urls, who)


def _block(verb: str) -> Callable[[Control, list[str], str], str]:
    def run(control: Control, args: list[str], who: str) -> str:
        if not args:
            raise UserError(f"{verb}: give one or more hosts or SURT prefixes")
        value = 1 if verb == "block" else None
        return control.set_rules(verb, [("block " + target_of(a), value) for a in args], who)
    return run


def _override(verb: str, what: str) -> Callable[[Control, list[str], str], str]:
    def run(control: Control, args: list[str], who: str) -> str:
        if len(args) != 2:
            raise UserError(f"{verb}: give HOST|SURT and a {what} ('off' removes it)")
        return control.set_rules(verb, [(f"{verb} {target_of(args[0])}", _number(verb, args[1]))], who)
    return run


def _scope(control: Control, args: list[str], who: str) -> str:
    if len(args) != 2 or args[0] not in ("allow", "deny", "remove"):
        raise UserError("scope: give allow|deny|remove and a regular expression or a SURT prefix (surt:org,example,)")
    from raycrawl.scope_rules import surt_prefix

    action, rule = args
    rule = ("surt:" + surt_prefix(rule[5:])) if rule.startswith("surt:") else "re:" + regex_of(rule)
    if action == "remove":
        return control.set_rules("scope", [(f"{kind} {rule}", None) for kind in ("allow", "deny")], who)
    return control.set_rules("scope", [(f"{action} {rule}", 1)], who)


VERBS: list[Verb] = [
    Verb("pause", "", "no new fetches (those in flight finish)",
         "no new fetches (those in flight finish)", "fetch actors, before acquiring", _switch("pause")),
    Verb("resume", "", "fetch again", "fetch again after `pause`", "fetch actors, before acquiring", _switch("resume")),
    Verb("stop", "", "stop as Ctrl-C does (--resume continues)",
         "the crawl stops as on Ctrl-C: fetchers stopped, everything fetched stored and committed; `--resume` continues",
         "every agent's loop", _switch("stop")),
    Verb("seeds", "add URL|FILE...", "queue seeds (through the crawl's scope and filters, like any link)",
         "the URLs go through the crawl's scope, filters and sieve like any link", "the lead agent", _seeds),
    Verb("block", "HOST|SURT...", "nothing fetched there from now on; queued URLs dropped as 'blocked'",
         "nothing fetched there from the command on (robots.txt included); its queued URLs are dropped as they are "
         "dequeued, recorded with error `blocked` (crawl.log status -5001)",
         "links (not followed) and fetch actors (queued URLs)", _block("block")),
    Verb("unblock", "HOST|SURT...", "undo a block",
         "URLs found from then on are crawled; those dropped while blocked are not queued again (the sieve has "
         "seen them)", "links and fetch actors", _block("unblock")),
    Verb("throttle", "HOST|SURT SECONDS|off", "the host delay there (higher or lower; never below Crawl-delay)",
         "that host delay, higher or lower than the crawl's, never below robots.txt's Crawl-delay",
         "the release that schedules the host's next fetch", _override("throttle", "delay in seconds")),
    Verb("budget", "HOST|SURT PAGES|off", "at most that many more pages there",
         "at most that many more pages there; the rest dropped as `budget` (-5003)", "fetch actors",
         _override("budget", "page count")),
    Verb("scope", "deny|allow|remove REGEX|surt:PREFIX", "drop links and queued URLs a rule denies",
         "links and queued URLs matching a deny rule (or, with allow rules, matching none) are dropped as "
         "`operator-scope` (-5000)", "links and fetch actors", _scope),
    Verb("show", "", "the switches and overrides in force", "the switches and overrides in force", "—", None),
]


def verb_named(name: str) -> Verb:
    for verb in VERBS:
        if verb.name == name.lower():
            return verb
    raise UserError(f"unknown command {name!r}: " + ", ".join(v.name for v in VERBS))


def command(control: Control, name: str, args: list[str], who: str) -> str:
    """Apply one operator command; what was done, in one line."""
    verb = verb_named(name)
    if verb.run is None:
        raise UserError(f"{verb.name} changes nothing: raycrawl ctl {verb.name}, or GET /api/status")
    return verb.run(control, args, who)


def ctl_help() -> str:
    """The verbs as ``raycrawl ctl --help`` lists them."""
    width = max(len(f"{v.name} {v.usage}") for v in VERBS) + 3
    return "\n".join(f"  {(v.name + ' ' + v.usage).strip():<{width}}{v.summary}" for v in VERBS)


def docs_table() -> str:
    """docs/operating.md's table of commands."""
    rows = ["| command | effect | where it applies |", "|---|---|---|"]
    for v in VERBS:
        usage = f" {v.usage}".replace("|", "\\|").replace("...", "…") if v.usage else ""
        rows.append(f"| `{v.name}{usage}` | {v.effect} | {v.where} |")
    return "\n".join(rows)


DOCS_START = "<!-- the verbs' table: `make docs` writes it from storage/operator_verbs.py -->"
DOCS_END = "<!-- end of the verbs' table -->"


def write_docs(path: Path) -> None:
    """Put :func:`docs_table` between the markers of ``path`` (docs/operating.md)."""
    text = path.read_text()
    head, _, rest = text.partition(DOCS_START + "\n")
    _, _, tail = rest.partition(DOCS_END)
    path.write_text(f"{head}{DOCS_START}\n{docs_table()}\n{DOCS_END}{tail}")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:
        write_docs(Path(sys.argv[1]))
    else:
        print(docs_table())
