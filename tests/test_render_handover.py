"""Renders' requisites between agents (actors/visit/render_handover.py), over a real Redis: asked of
the owner of their host, answered from its cache at once or when it fetches them; the crawl of
tests/test_render_crawl.py shows it inside two agents."""

from __future__ import annotations

import redis

from raycrawl.actors.visit.render_handover import LARGEST, Handover
from raycrawl.actors.visit.renderer import Resource
from raycrawl.storage.redis_frontier import RedisFrontier


def owner(url: str) -> str:
    return "agent1" if "cdn.test" in url else "agent0"


def test_asked_answered_from_the_cache_or_once_fetched(redis_url) -> None:
    client = redis.Redis.from_url(redis_url)
    a = Handover(RedisFrontier(client, "rc:", view="agent0"), "agent0", owner)
    b = Handover(RedisFrontier(client, "rc:", view="agent1"), "agent1", owner)
    lib = Resource(200, {"content-type": "text/javascript"}, b"window.lib = 1;\n\x00\xff")
    held = {"http://cdn.test/lib.js": lib}
    a.ask("http://a.test/own.js")  # its own host: nobody is asked
    a.ask("http://cdn.test/lib.js")
    a.ask("http://cdn.test/font.woff")
    assert a.exchange(lambda u: None) == []  # (asks sent)
    assert b.exchange(held.get) == []  # lib.js answered from b's cache; font.woff remembered
    assert a.exchange(lambda u: None) == [("http://cdn.test/lib.js", lib)]
    font = Resource(200, {"content-type": "font/woff"}, b"wOFF")
    b.fetched("http://cdn.test/font.woff", font)  # b fetches it later: a gets it
    b.fetched("http://cdn.test/other.css", font)  # nobody asked
    b.exchange(held.get)
    assert a.exchange(lambda u: None) == [("http://cdn.test/font.woff", font)]
    assert client.llen("rc:rask:agent0") == client.llen("rc:rask:agent1") == 0
    # too large to hand over: the page renders without it after render_wait, as on one agent
    a.ask("http://cdn.test/huge.bin")
    a.exchange(lambda u: None)
    b.exchange(lambda u: Resource(200, {}, b"x" * (LARGEST + 1)))
    assert a.exchange(lambda u: None) == []
    assert (a.counters, b.counters) == ({"asked": 3, "answered": 0, "received": 2},
                                        {"asked": 0, "answered": 2, "received": 0})
    client.close()
