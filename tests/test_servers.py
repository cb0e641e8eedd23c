"""Servers and visit-state entries (core/servers.py): one server per host name, whatever the
scheme and port; an entry names its origin and splits back into the very URL."""

from __future__ import annotations

import pytest

from raycrawl.actors.frontier.workbench import ROBOTS, inflight_key, inflight_url, is_robots, robots_marker
from raycrawl.servers import name_of, origin_of, server_of, split_server, url_of
from raycrawl.urls import canonicalize, split_host

URLS = [
    "http://a.test/", "https://a.test/", "http://a.test:8080/x", "https://a.test:8443/x?q=1",
    "http://a.test/x!y/z?next=/a!b", "https://a.test/!robots", "http://127.0.0.1:9/p", "http://[::1]:8080/v6",
    "https://[2001:db8::1]/", "http://xn--fa-hia.test/caf%C3%A9?x=%2F",
]


@pytest.mark.parametrize("url", URLS)
def test_an_entry_splits_back_into_its_url_and_origin(url: str) -> None:
    assert canonicalize(url) == url  # the fixtures are canonical, as the frontier's URLs are
    server, entry = split_server(url)
    assert url_of(server, entry) == url
    origin, path = split_host(url)
    assert origin_of(server, entry) == (origin, path)
    assert not is_robots(entry)
    marker = robots_marker(entry)
    assert is_robots(marker) and origin_of(server, marker) == (origin, ROBOTS)
    assert inflight_url(inflight_key(server, entry)) == url


def test_one_server_for_every_scheme_and_port_of_a_name() -> None:
    servers = {server_of(u) for u in URLS[:6]}
    assert servers == {"a.test"}
    assert split_server("http://a.test/x")[1] == "/x"  # plain http costs no tag
    assert name_of(server_of("http://[::1]:8080/")) == "::1"
    # distinct origins stay distinct entries (robots.txt is per origin)
    assert len({split_server(u)[1] for u in ("http://a.test/", "https://a.test/", "http://a.test:81/",
                                              "https://a.test:81/")}) == 4


@pytest.mark.parametrize("hop", ["!robots", "!robots 2 1795600000.250000 /robots-moved.txt",
                                 "!robots 1 12.500000 https://b.test:8443/robots.txt?x=a b"])
def test_a_robots_marker_decodes_to_its_hop_and_back(hop: str) -> None:
    from raycrawl.actors.fetch.robots_fetch import RobotsHop

    decoded = RobotsHop.decode(hop)
    assert decoded.encode() == hop and RobotsHop.decode(decoded.encode()) == decoded
    assert RobotsHop.decode("!robots 3 /robots.txt") == RobotsHop(3, 0.0, "/robots.txt")  # an older crawl's
