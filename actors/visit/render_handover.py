"""Requisites between agents: a render waits for a requisite whose host another agent owns (a
CDN's script that every site's pages load belongs to one agent of the crawl), so it asks that agent.

The render stage (actors/visit/stages/render.py) judges a waiting page's requisites as every
requisite is judged; the owner fetches a new one politely, or has it already (the sieve forgets
nothing, so a URL fetched once is never fetched again, for whichever agent asks). Either way the
response reaches the owner's render stage, not the asker's: the asker asks the owner through Redis
(``P rask:<owner>``), and the owner answers from its cache of recent responses at once, or when it
fetches the URL, into the asker's inbox (``P rinbox:<asker>``). Both sides exchange once a second.
A response the owner no longer holds (its cache is bounded) or larger than :data:`LARGEST` is
not handed over: the page renders without it after ``render_wait``, as it does on one agent.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from raycrawl.actors.visit.renderer import Resource

if TYPE_CHECKING:
    from raycrawl.storage.redis_frontier import RedisFrontier

LARGEST = 8 << 20  # bytes of one response handed over
REMEMBERED = 10_000  # URLs asked of this agent that it has not fetched yet


def encode(url: str, res: Resource) -> bytes:
    return json.dumps([url, res.status, res.headers]).encode() + b"\n" + res.body


def decode(blob: bytes) -> tuple[str, Resource]:
    head, _, body = blob.partition(b"\n")
    url, status, headers = json.loads(head)
    return url, Resource(status, headers, body)


class Handover:
    """One agent's side: ``owner`` says which agent owns a URL's host (the link router's, current)."""

    def __init__(self, frontier: RedisFrontier, me: str, owner: Callable[[str], str]) -> None:
        self.f, self.me, self.owner = frontier, me, owner
        self.asks: dict[str, list[str]] = {}  # owner → URLs to ask it for
        self.answers: dict[str, list[bytes]] = {}  # asker → responses to hand it
        self.wanted: OrderedDict[str, set[str]] = OrderedDict()  # URL → agents waiting for it here
        self.counters = {"asked": 0, "answered": 0, "received": 0}

    def ask(self, url: str) -> None:
        """A waiting page here needs ``url``: if another agent owns it, ask that agent."""
        who = self.owner(url)
        if who != self.me:
            self.asks.setdefault(who, []).append(url)

    def fetched(self, url: str, res: Resource) -> None:
        """This agent archived ``url``: the agents that asked for it get it."""
        for asker in self.wanted.pop(url, ()):
            self._answer(asker, url, res)

    def _answer(self, asker: str, url: str, res: Resource) -> None:
        if len(res.body) <= LARGEST:
            self.answers.setdefault(asker, []).append(encode(url, res))
            self.counters["answered"] += 1

    def exchange(self, cached: Callable[[str], Resource | None]) -> list[tuple[str, Resource]]:
        """Send this agent's asks and answers; answer what was asked of it from ``cached`` or
        remember it; return the responses other agents handed it."""
        if self.asks:
            self.counters["asked"] += sum(map(len, self.asks.values()))
            self.f.render_ask(self.me, self.asks)
            self.asks = {}
        for asker, url in self.f.render_asked(self.me):
            res = cached(url)
            if res is not None:
                self._answer(asker, url, res)
            else:
                self.wanted.setdefault(url, set()).add(asker)
                self.wanted.move_to_end(url)
                while len(self.wanted) > REMEMBERED:
                    self.wanted.popitem(last=False)
        if self.answers:
            self.f.render_answer(self.answers)
            self.answers = {}
        got = [decode(blob) for blob in self.f.render_answers(self.me)]
        self.counters["received"] += len(got)
        return got
