"""robots.txt: RFC 9309 matching (via protego), status semantics, redirects, Crawl-delay, expiry."""

from __future__ import annotations

import pickle
import time

import pytest
from aiohttp import web

from raycrawl.actors.fetch.fetch_loop import FetchLoop
from raycrawl.policies.robots import ALLOW_ALL, DISALLOW_ALL, RobotsRules, ua_token
from raycrawl.settings import Settings

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
    """robots.txt by Host header: one behaviour per host name (served on 127.0.0.1 and 127.0.0.2)."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []
        self.times: dict[str, list[tuple[float, float]]] = {}  # host → (request start, response end)
        self.ip_times: dict[str, list[tuple[float, float]]] = {}  # local address → the same
        self.flaky = 0
        self.ports: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = time.time()
        host = request.headers["Host"].split(":")[0]
        try:
            return await self._handle(request, host)
        finally:
            self.times.setdefault(host, []).append((start, time.time()))
            local = request.transport.get_extra_info("sockname")[0]
            self.ip_times.setdefault(local, []).append((start, time.time()))

    async def _handle(self, request: web.Request, host: str) -> web.StreamResponse:
        self.hits.append((host, request.path_qs))
        p1, p2 = self.ports["127.0.0.1"], self.ports["127.0.0.2"]
        if request.path != "/robots.txt" and host not in ("moved.test", "loop.test", "other.test"):
            return web.Response(text="page")
        if host in ("ok.test", "www.ok.test"):
            return web.Response(body=ROBOTS, content_type="text/plain")
        if host == "gone.test":
            return web.Response(status=404)
        if host == "down.test":
            return web.Response(status=503)
        if host == "flaky.test":  # one 503, then the file
            self.flaky += 1
            return web.Response(status=503) if self.flaky == 1 else web.Response(body=ROBOTS)
        if host == "moved.test":  # two same-host hops
            if request.path == "/robots.txt":
                raise web.HTTPMovedPermanently("/robots2.txt")
            if request.path == "/robots2.txt":
                raise web.HTTPFound("/real-robots.txt")
            if request.path == "/real-robots.txt":
                return web.Response(body=b"User-agent: *\nDisallow: /secret\n", content_type="text/plain")
            return web.Response(text="page")
        if host == "loop.test":  # redirects forever
            if not request.path.startswith("/robots"):
                return web.Response(text="page")
            n = int(request.query.get("n", "0"))
            raise web.HTTPFound(f"/robots.txt?n={n + 1}")
        if host == "ok.test" or host == "cross.test":  # to another name on the same address
            raise web.HTTPMovedPermanently(f"http://www.ok.test:{p1}/robots.txt")
        if host == "far.test":  # to another name on another address
            raise web.HTTPMovedPermanently(f"http://other.test:{p2}/robots.txt")
        if host == "other.test":
            if request.path == "/robots.txt":
                return web.Response(body=b"User-agent: raycrawl\nDisallow: /far-secret\n")
            return web.Response(text="page")
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
    for addr in ("127.0.0.1", "127.0.0.2"):
        tcp = web.TCPSite(runner, addr, 0)
        await tcp.start()
        state.ports[addr] = tcp._server.sockets[0].getsockname()[1]
    state.port = state.ports["127.0.0.1"]
    yield state
    await runner.cleanup()


HOSTS_FILE = """127.0.0.1 ok.test www.ok.test gone.test down.test flaky.test moved.test loop.test cross.test far.test huge.test
127.0.0.2 other.test
"""


async def crawl_robots(redis_url: str, tmp_path, site: RobotsSite, names: list[str], **settings) -> FetchLoop:
    """Run the crawl's fetch loop (the one robots.txt code path) over one page per host until every
    page has an outcome; returns the loop (rules in ``loop.robots``, outcomes in ``loop.outcomes``)."""
    hosts = tmp_path / "hosts"
    hosts.write_text(HOSTS_FILE)
    s = Settings(resolve=str(hosts), allow_networks=settings.pop("allow_networks", "127.0.0.0/8"),
                 host_delay=settings.pop("host_delay", 0.0), ip_delay=settings.pop("ip_delay", 0.0),
                 max_crawl_delay=settings.pop("max_crawl_delay", 0.0), retry_backoff=0.05, connect_timeout=1.0,
                 read_timeout=1.0, **settings)
    loop = FetchLoop(s, redis_url)
    port = site.port
    servers = {n: ("127.0.0.2" if n == "other.test" else "127.0.0.1") for n in names}
    loop.wb.add_urls([f"http://{n}:{port}/page" for n in servers], servers, new_hosts=set(servers))
    await loop.start()
    loop.outcomes = []
    deadline = time.time() + 30
    while sum(o.kind == "page" for o in loop.outcomes) < len(servers) and time.time() < deadline:
        loop.outcomes += await loop.drain(1000, 0.2)
    await loop.stop()
    loop.outcomes += await loop.drain(1000, 0)
    return loop


async def test_robots_over_http_through_the_fetch_loop(robots_site, redis_url, tmp_path):
    from raycrawl.policies.robots import UNREACHABLE_TTL

    names = ["ok.test", "gone.test", "down.test", "flaky.test", "moved.test", "loop.test", "cross.test",
             "far.test", "huge.test"]
    loop = await crawl_robots(redis_url, tmp_path, robots_site, names, max_retries=2)
    port, p2 = robots_site.port, robots_site.ports["127.0.0.2"]
    rules = {h.split("//")[1].split(":")[0]: r for h, r in loop.robots.items()}
    hits = robots_site.hits

    assert rules["ok.test"].crawl_delay == 2.5 and not rules["ok.test"].allowed(f"http://ok.test:{port}/private")
    assert rules["gone.test"].mode == ALLOW_ALL
    # 503 three times (the request and max_retries retries), then unreachable, re-checked early
    assert hits.count(("down.test", "/robots.txt")) == 3 and rules["down.test"].mode == DISALLOW_ALL
    down = [o.fr for o in loop.outcomes if o.kind == "robots" and "down.test" in o.fr.url]
    assert rules["down.test"].expires <= down[-1].ended + UNREACHABLE_TTL
    # one 503, then the file: parsed, not disallow-all for a day
    assert hits.count(("flaky.test", "/robots.txt")) == 2 and rules["flaky.test"].crawl_delay == 2.5
    assert not rules["moved.test"].allowed(f"http://moved.test:{port}/secret")
    assert rules["moved.test"].allowed(f"http://moved.test:{port}/x")
    assert sum(h == "loop.test" for h, _ in hits if _.startswith("/robots")) == 6  # the request + 5 hops
    assert rules["loop.test"].mode == ALLOW_ALL  # more than 5 redirects: unavailable
    # across authorities: the rules found apply to the host that was asked
    assert ("www.ok.test", "/robots.txt") in hits and rules["cross.test"].crawl_delay == 2.5
    assert not rules["cross.test"].allowed(f"http://cross.test:{port}/private")
    assert ("other.test", "/robots.txt") in hits
    assert not rules["far.test"].allowed(f"http://far.test:{port}/far-secret")
    assert not rules["huge.test"].allowed(f"http://huge.test:{port}/a") and rules["huge.test"].allowed(f"http://huge.test:{port}/b")
    # a page is fetched only after its host's robots.txt is known
    pages = [h for h, path in hits if path == "/page"]
    assert "down.test" not in pages and {"ok.test", "gone.test", "flaky.test", "cross.test", "far.test"} <= set(pages)
    assert f"http://other.test:{p2}/robots.txt" in {o.fr.url for o in loop.outcomes if o.kind == "robots"}


async def test_robots_redirect_to_a_forbidden_network_is_unreachable(robots_site, redis_url, tmp_path):
    loop = await crawl_robots(redis_url, tmp_path, robots_site, ["far.test"], allow_networks="127.0.0.1/32",
                              max_retries=1)
    [rules] = loop.robots.values()
    assert rules.mode == DISALLOW_ALL
    assert ("other.test", "/robots.txt") not in robots_site.hits  # nothing sent to the forbidden address
    assert ("far.test", "/page") not in robots_site.hits


async def test_redirect_hops_are_polite(robots_site, redis_url, tmp_path):
    """Every hop is a request like any other: from the end of one response to the start of the next
    request to the same host, and to the same IP, at least the delays (hops on the asked host also
    wait max_crawl_delay, its Crawl-delay being unknown until the file is read)."""
    await crawl_robots(redis_url, tmp_path, robots_site, ["moved.test", "loop.test", "cross.test", "far.test"],
                       host_delay=0.15, ip_delay=0.05, max_crawl_delay=0.2)
    for host, times in robots_site.times.items():
        gaps = [b[0] - a[1] for a, b in zip(times, times[1:], strict=False)]
        assert not gaps or min(gaps) >= 0.15, (host, gaps)
    for addr, times in robots_site.ip_times.items():
        times = sorted(times)
        gaps = [b[0] - a[1] for a, b in zip(times, times[1:], strict=False)]
        assert not gaps or min(gaps) >= 0.05, (addr, gaps)
    assert len(robots_site.times["loop.test"]) == 7  # 6 robots requests + the page


async def test_crawl_delay_read_elsewhere_counts_from_the_hosts_own_last_request(robots_site, redis_url, tmp_path):
    """cross.test's robots.txt redirects to www.ok.test, whose file says Crawl-delay 2.5 (capped at
    max_crawl_delay 0.6): cross.test's first page waits that long after cross.test's own last answer
    (the redirect), not only the host delay after the rules arrived from the other authority."""
    await crawl_robots(redis_url, tmp_path, robots_site, ["cross.test"], host_delay=0.05, max_crawl_delay=0.6)
    times = robots_site.times["cross.test"]
    assert len(times) == 2  # the redirect, the page
    assert times[1][0] - times[0][1] >= 0.6, times
