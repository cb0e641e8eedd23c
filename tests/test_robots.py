"""robots.txt: RFC 9309 matching (via protego), status semantics, redirects, Crawl-delay, expiry."""

from __future__ import annotations

import pickle
import socket
import time

import pytest
from aiohttp import web

from actors.dns import Resolver
from actors.fetcher import Fetcher
from policies.networks import NetworkPolicy
from policies.robots import ALLOW_ALL, DISALLOW_ALL, RobotsRules, ua_token

UA = "raycrawl/0.1 (+http://raycrawl.test/bot)"
ROBOTS = b"""# RFC 9309 section 5 examples, adapted
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: RayCrawl
Crawl-delay: 2.5
Allow: /example/page/
Disallow: /example/page/disallowed.gif
Disallow: /private
Allow: /private/open$
Disallow: /*.php$

Sitemap: http://a.test/sitemap.xml
"""


def rules(body: bytes = ROBOTS, status: int = 200, ua: str = UA) -> RobotsRules:
    return RobotsRules.from_response(status, body, ua, now=1000.0, ttl=3600)


def test_ua_token():
    assert ua_token(UA) == "raycrawl" and ua_token("FooBot/2") == "FooBot" and ua_token("") == "*"


def test_our_group_longest_match_wins():
    r = rules()
    assert r.allowed("http://a.test/example/page/")  # our group, not "*": /example/ is allowed for us
    assert r.allowed("http://a.test/example/page/x.html")
    assert not r.allowed("http://a.test/example/page/disallowed.gif")
    assert not r.allowed("http://a.test/private") and not r.allowed("http://a.test/private/x")
    assert r.allowed("http://a.test/private/open") and not r.allowed("http://a.test/private/open2")
    assert not r.allowed("http://a.test/x/index.php") and r.allowed("http://a.test/x/index.php?y=1")
    assert r.allowed("http://a.test/other") and r.allowed("http://a.test/robots.txt")
    assert r.crawl_delay == 2.5
    assert r.sitemaps == ["http://a.test/sitemap.xml"] and rules(status=404).sitemaps == []


def test_other_groups():
    star = rules(ua="otherbot/1.0")
    assert not star.allowed("http://a.test/example/x") and star.allowed("http://a.test/publications/")
    assert not star.allowed("http://a.test/pic.gif") and star.allowed("http://a.test/pic.gif?x")
    assert star.crawl_delay is None
    foo = rules(ua="foobot")
    assert foo.allowed("http://a.test/example/page.html") and not foo.allowed("http://a.test/example/other")


def test_status_semantics():
    assert rules(status=404).mode == ALLOW_ALL and rules(status=404).allowed("http://a.test/x")
    assert rules(status=401).allowed("http://a.test/x") and rules(status=403).allowed("http://a.test/x")
    for status in (0, 429, 500, 503):
        r = rules(status=status)
        assert r.mode == DISALLOW_ALL and not r.allowed("http://a.test/") and r.crawl_delay is None
    assert rules(b"", 200).allowed("http://a.test/anything")  # empty file: allow all
    assert rules(b"\xff\xfe garbage \x00 Disallow /", 200).allowed("http://a.test/")  # junk never raises


def test_expiry_and_serialisation():
    r = rules()
    assert r.expires == 4600.0 and not r.expired(4599.9) and r.expired(4600.0)
    for copy in (pickle.loads(pickle.dumps(r)), RobotsRules.from_dict(r.to_dict())):
        assert copy.allowed("http://a.test/private/open") and not copy.allowed("http://a.test/private")
        assert copy.crawl_delay == 2.5 and copy.expires == r.expires


class RobotsSite:
    """robots.txt by Host header: one behaviour per host name."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []
        self.times: list[tuple[float, float]] = []  # (request start, response end) per hit

    async def handle(self, request: web.Request) -> web.Response:
        start = time.time()
        try:
            return await self._handle(request)
        finally:
            self.times.append((start, time.time()))

    async def _handle(self, request: web.Request) -> web.Response:
        host = request.headers["Host"].split(":")[0]
        self.hits.append((host, request.path))
        port = request.url.port
        if host == "ok.test":
            return web.Response(body=ROBOTS, content_type="text/plain")
        if host == "gone.test":
            return web.Response(status=404)
        if host == "down.test":
            return web.Response(status=503)
        if host == "moved.test":  # two same-host hops
            if request.path == "/robots.txt":
                raise web.HTTPMovedPermanently("/robots2.txt")
            if request.path == "/robots2.txt":
                raise web.HTTPFound("/real-robots.txt")
            return web.Response(body=b"User-agent: *\nDisallow: /secret\n", content_type="text/plain")
        if host == "loop.test":  # redirects forever
            n = int(request.query.get("n", "0"))
            raise web.HTTPFound(f"/robots.txt?n={n + 1}")
        if host == "cross.test":
            raise web.HTTPMovedPermanently(f"http://ok.test:{port}/robots.txt")
        if host == "huge.test":  # 2 MB: only the first 512 KiB is parsed
            return web.Response(body=b"User-agent: *\nDisallow: /a\n" + b"#" * 2_000_000 + b"\nDisallow: /b\n")
        return web.Response(status=404)


@pytest.fixture
async def robots_site():
    state = RobotsSite()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    state.port = tcp._server.sockets[0].getsockname()[1]
    yield state
    await runner.cleanup()


async def test_fetch_robots_over_http(robots_site, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 ok.test\n")
    fetcher = Fetcher(UA, 1.0, 1.0, 100_000, 1_000_000, NetworkPolicy("127.0.0.0/8"), resolver=Resolver(hosts_file=str(hosts)))
    bare = Fetcher(UA, 1.0, 1.0, 100_000, 1_000_000, NetworkPolicy("127.0.0.0/8"))
    port = robots_site.port
    try:
        fr, r = await fetcher.fetch_robots(f"http://ok.test:{port}", "127.0.0.1")
        assert fr.status == 200 and r.crawl_delay == 2.5 and not r.allowed(f"http://ok.test:{port}/private")
        assert r.expires == fr.ended + 24 * 3600

        fr, r = await fetcher.fetch_robots(f"http://gone.test:{port}", "127.0.0.1", ttl=60)
        assert r.mode == ALLOW_ALL and r.expires == fr.ended + 60
        _, r = await fetcher.fetch_robots(f"http://down.test:{port}", "127.0.0.1")
        assert r.mode == DISALLOW_ALL

        fr, r = await fetcher.fetch_robots(f"http://moved.test:{port}", "127.0.0.1")
        assert fr.url == f"http://moved.test:{port}/real-robots.txt" and len(fr.hops) == 2
        assert not r.allowed(f"http://moved.test:{port}/secret") and r.allowed(f"http://moved.test:{port}/x")

        robots_site.hits.clear()
        fr, r = await fetcher.fetch_robots(f"http://loop.test:{port}", "127.0.0.1")
        assert r.mode == ALLOW_ALL  # more than 5 redirects: unavailable
        assert len(robots_site.hits) == 6  # the first request + 5 followed hops, then we stop

        fr, r = await fetcher.fetch_robots(f"http://cross.test:{port}", "127.0.0.1")
        assert r.crawl_delay == 2.5 and fr.url.startswith("http://ok.test")
        _, r = await bare.fetch_robots(f"http://cross.test:{port}", "127.0.0.1")  # can't resolve: unreachable
        assert r.mode == DISALLOW_ALL

        fr, r = await fetcher.fetch_robots(f"http://huge.test:{port}", "127.0.0.1")
        assert fr.error is None and not r.allowed(f"http://huge.test:{port}/a") and r.allowed(f"http://huge.test:{port}/b")

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        fr, r = await fetcher.fetch_robots(f"http://ok.test:{dead}", "127.0.0.1")
        assert fr.error == "connect" and r.mode == DISALLOW_ALL
        fr, r = await bare.fetch_robots(f"http://ok.test:{port}", "10.0.0.1")  # forbidden network
        assert fr.error == "forbidden-network" and r.mode == DISALLOW_ALL
    finally:
        await fetcher.close()
        await bare.close()


async def test_redirect_hops_are_polite(robots_site):
    fetcher = Fetcher(UA, 1.0, 1.0, 100_000, 1_000_000, NetworkPolicy("127.0.0.0/8"), robots_hop_delay=0.15)
    try:
        fr, r = await fetcher.fetch_robots(f"http://moved.test:{robots_site.port}", "127.0.0.1")
        _, _ = await fetcher.fetch_robots(f"http://loop.test:{robots_site.port}", "127.0.0.1", hop_delay=0.05)
    finally:
        await fetcher.close()
    assert len(fr.hops) == 2 and not r.allowed(f"http://moved.test:{robots_site.port}/secret")
    moved, loop = robots_site.times[:3], robots_site.times[3:]
    assert len(loop) == 6
    # from the end of each response to the start of the next request: at least the hop delay
    assert min(b[0] - a[1] for a, b in zip(moved, moved[1:], strict=False)) >= 0.15
    assert min(b[0] - a[1] for a, b in zip(loop, loop[1:], strict=False)) >= 0.05
