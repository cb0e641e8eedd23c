"""The fetch loop's own failure modes (its visits are exercised by the robots and crawl tests)."""

from __future__ import annotations

import pytest
from loopback_http import serve

from raycrawl.actors.fetch.fetch_loop import FetchLoop
from raycrawl.settings import Settings


async def one_page_site():
    """A loopback site answering every path with a small page, robots.txt with 404: (runner, port)."""
    from aiohttp import web

    async def page(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        return web.Response(text="<html><body>a page</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return await serve(app)


async def test_a_crashed_loop_is_reported_not_waited_for(redis_url):
    """A bug inside the loop must reach the agent (through ``drain``), which then stops the crawl;
    before, the loop task died, its error went to a log, and the agent waited for visits forever."""
    loop = FetchLoop(Settings(allow_networks="127.0.0.0/8"), redis_url)

    def broken(*_args, **_kwargs):
        raise ValueError("a bug")

    loop.wb.release_and_acquire = broken
    await loop.start()
    with pytest.raises(RuntimeError, match="fetch loop crashed") as info:
        for _ in range(50):
            await loop.drain(10, 0.05)
    assert isinstance(info.value.__cause__, ValueError)
    loop._runner = None  # stop() would re-raise the crash
    await loop.stop()


async def test_politeness_wait_and_dns_lookups_are_counted(redis_url, tmp_path):
    """What the dashboard's two panels plot: the seconds a fetch actor had free slots while its only
    host waited out its delay (robots.txt and 3 pages, 0.3 s apart: 0.9 s, at most the crawl's wall
    time), and DNS lookups sent (cache misses), by outcome."""
    import time

    runner, port = await one_page_site()
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 a.test\n")
    loop = FetchLoop(Settings(allow_networks="127.0.0.0/8", host_delay=0.3, ip_delay=0.0, resolve=str(hosts)),
                     redis_url)
    try:
        assert await loop.resolve_many(["a.test", "nx.test", "a.test"]) == {"a.test": "127.0.0.1", "nx.test": None}
        loop.wb.frontier.add([("a.test", "127.0.0.1", [f":{port}/1", f":{port}/2", f":{port}/3"])])
        t0 = time.monotonic()
        await loop.start()
        pages = []
        while len(pages) < 3 and time.monotonic() - t0 < 20:
            pages += [o for o in await loop.drain(10, 0.1) if o.kind == "page"]
        wall = time.monotonic() - t0
        assert [o.fr.status for o in pages] == [200, 200, 200]
        status = loop.status()
        assert (status["dns_lookups"], status["dns_answered"], status["dns_failures"]) == (2, 1, 1)
        # (the wait is timed from the round after each release: a few ms of each gap, more on a
        # loaded machine, go unseen)
        assert 0.6 <= status["politeness_idle_s"] <= wall, (status["politeness_idle_s"], wall)
    finally:
        await loop.stop()
        await runner.cleanup()


async def test_a_drain_lingers_for_a_fuller_batch(redis_url, tmp_path):
    """``drain_linger``: once a visit has ended the drain waits (from its call) for more, and returns as
    soon as it has ``max_items`` (here: three hosts' robots.txt and page each, six visits, with a
    linger of 30 s that must not be waited out)."""
    import time

    runner, port = await one_page_site()
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"127.0.0.1 {h}.test\n" for h in "abc"))
    loop = FetchLoop(Settings(allow_networks="127.0.0.0/8", host_delay=0.0, ip_delay=0.0, resolve=str(hosts),
                              drain_linger=30.0), redis_url)
    try:
        loop.wb.frontier.add([(f"{h}.test", "127.0.0.1", [f":{port}/1"]) for h in "abc"])
        await loop.start()
        t0 = time.monotonic()
        first = await loop.drain(6, 10.0)
        assert len(first) == 6 and time.monotonic() - t0 < 10, (len(first), time.monotonic() - t0)
        assert sorted(o.kind for o in first) == ["page"] * 3 + ["robots"] * 3
    finally:
        await loop.stop()
        await runner.cleanup()


async def test_a_response_on_the_wire_is_read_while_redis_holds_writes(redis_url, tmp_path):
    """Redis holds writes (CLIENT PAUSE WRITE: a membership change, a failover, a stalled fsync) for
    twice the fetcher's whole-exchange bound while a slow page's response is on its way: the loop
    reads it as it arrives — one request, status 200 — and the pages after the pause are fetched.
    (With its Redis calls on the loop's own thread, the loop stood still until Redis answered, the
    response's bound ran out meanwhile, and the page was fetched a second time: a join mid-crawl
    did that in tests/test_agents.py.)"""
    import asyncio
    import time

    import redis
    from aiohttp import web

    asked: list[str] = []
    slow_asked = asyncio.Event()

    async def page(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        asked.append(f"{request.host.split(':')[0]}{request.path}")
        if request.path == "/slow":
            slow_asked.set()
            await asyncio.sleep(0.7)  # (within one read timeout)
        return web.Response(text="<html><body>a page</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner, port = await serve(app)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 a.test\n127.0.0.1 b.test\n")
    s = Settings(allow_networks="127.0.0.0/8", host_delay=0.1, ip_delay=0.0, resolve=str(hosts),
                 connect_timeout=0.5, read_timeout=1.5, max_retries=1)
    bound = s.connect_timeout + 3 * s.read_timeout  # the fetcher's whole exchange
    loop = FetchLoop(s, redis_url)
    other = redis.Redis.from_url(redis_url)
    try:
        loop.wb.frontier.add([("a.test", "127.0.0.1", [f":{port}/slow"]),
                              ("b.test", "127.0.0.1", [f":{port}/{i}" for i in range(30)])])
        await loop.start()
        await asyncio.wait_for(slow_asked.wait(), 20)
        other.execute_command("CLIENT", "PAUSE", str(int(2 * bound * 1000)), "WRITE")
        pages, t0 = [], time.monotonic()
        while len(pages) < 31 and time.monotonic() - t0 < 60:
            pages += [o for o in await loop.drain(50, 0.2) if o.kind == "page"]
        slow = [o.fr for o in pages if o.fr.url.endswith("/slow")]
        assert [(fr.status, fr.error) for fr in slow] == [(200, None)], [(fr.status, fr.error) for fr in slow]
        assert asked.count("a.test/slow") == 1, asked
        assert len(pages) == 31 and all(o.fr.status == 200 for o in pages), [(o.fr.url, o.fr.error) for o in pages]
    finally:
        other.execute_command("CLIENT", "UNPAUSE")
        other.close()
        await loop.stop()
        await runner.cleanup()


async def test_a_stop_releases_every_host_its_visits_held(redis_url, tmp_path):
    """stop() while two pages are on the wire and Redis holds writes (CLIENT PAUSE WRITE): the
    first page's release waits on Redis, the second page ends meanwhile, and both hosts are handed
    back by the time stop() returns, with their next-fetch times from their own responses. (The
    loop ended once its visits had, with a release that came in during the last flush still in
    hand: the agent's recover_view then freed that host from its own clock, and the release, sent
    after the restart, was refused — a Redis restart under two agents let a host be asked 425 ms
    after robots.txt under a 500 ms delay.)"""
    import asyncio
    import time

    import redis
    from aiohttp import web

    asked = {"b.test": asyncio.Event(), "c.test": asyncio.Event()}
    ended: dict[str, float] = {}

    async def page(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        host = request.host.split(":")[0]
        asked[host].set()
        await asyncio.gather(*(e.wait() for e in asked.values()))  # both on the wire, then
        await asyncio.sleep(0.3 if host == "b.test" else 1.2)
        ended[host] = time.time()
        return web.Response(text="<html><body>a page</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner, port = await serve(app)
    await web.TCPSite(runner, "127.0.0.2", port).start()  # (one IP is one request at a time)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 b.test\n127.0.0.2 c.test\n")
    delay = 0.1
    s = Settings(allow_networks="127.0.0.0/8", host_delay=delay, ip_delay=0.0, resolve=str(hosts), read_timeout=3)
    loop = FetchLoop(s, redis_url)
    other = redis.Redis.from_url(redis_url)
    f = loop.wb.frontier
    try:
        f.add([("b.test", "127.0.0.1", [f":{port}/b"]), ("c.test", "127.0.0.2", [f":{port}/c"])])
        await loop.start()
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in asked.values())), 20)
        stop = asyncio.create_task(loop.stop())
        await asyncio.sleep(0.05)
        other.execute_command("CLIENT", "PAUSE", "1500", "WRITE")  # b's release waits; c ends meanwhile
        await asyncio.wait_for(stop, 30)
        assert sorted(ended) == ["b.test", "c.test"]
        assert loop.releases == [] and other.hlen(f.k.hbusy) == 0, (loop.releases, other.hgetall(f.k.hbusy))
        for host, end in ended.items():  # (the server's end: the fetcher's is a moment later)
            assert float(other.hget(f.k.hnext, host)) >= end + delay
    finally:
        other.execute_command("CLIENT", "UNPAUSE")
        other.close()
        await loop.stop()
        await runner.cleanup()
