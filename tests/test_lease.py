"""Fencing (actors/cluster/lease.py, lua/lease.lua, lua/fence.lua): a departed agent can never fetch beside
its successor, nor undo in Redis what its successor does with its hosts."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from loopback_http import serve

from raycrawl.actors.cluster.lease import Lease, longest_fetch
from raycrawl.actors.cluster.membership import Membership
from raycrawl.actors.fetch.fetcher import Fetcher
from raycrawl.actors.frontier.workbench import Release, Workbench
from raycrawl.exchange import LOCAL
from raycrawl.policies.networks import NetworkPolicy
from raycrawl.policies.politeness import Politeness
from raycrawl.settings import Settings
from raycrawl.storage.redis_frontier import Fenced, RedisFrontier


def test_fence_waits_for_the_lease_and_is_final(client, redis_url) -> None:
    """While the lease runs nothing is fenced; once it lapsed the fence holds for good: renewals
    are refused and the lease's holder learns it."""
    lease = Lease(redis_url, "t:", "a1", ttl=0.6, interval=10)
    assert lease.renew() and lease.valid() and not lease.valid(margin=0.7)
    f = RedisFrontier(client, "t:", view="a1", register=False)
    left = f.fence()
    assert 0 < left <= 0.6
    assert not client.exists("t:v:a1:fenced")
    time.sleep(left + 0.05)
    assert not lease.valid()  # its own clock says so too, without asking Redis
    assert f.fence() == 0.0 and client.exists("t:v:a1:fenced")
    assert not lease.renew() and lease.fenced and not lease.valid()
    assert f.fence() == 0.0  # again: nothing changes
    other = Lease(redis_url, "t:", "a0", ttl=5)
    assert other.renew() and other.valid(margin=4)  # another agent's lease is its own
    f.clear_fences()  # a new run names its agents afresh
    assert Lease(redis_url, "t:", "a1", ttl=5).renew()


def test_a_frozen_holder_believes_in_its_lease_no_longer_than_redis(redis_url) -> None:
    """The holder's belief ends TTL after it SENT its last renewal (its monotonic clock), never later
    than Redis's: a process frozen past it wakes up with no lease, though nothing told it."""
    lease = Lease(redis_url, "t:", "a2", ttl=0.4, interval=10)
    before = time.monotonic()
    assert lease.renew()
    assert lease.until <= before + 0.4 + 0.05
    time.sleep(0.45)
    assert not lease.valid()


def test_a_fenced_view_acquires_borrows_releases_and_commits_nothing(client) -> None:
    """Agent a1 acquired y.test, then was fenced (its lease lapsed: it is taken for departed). Its
    host goes back (recover_view) to be fetched by a0 after the longest fetch; a1's late release
    must not free a0's request, its late acquire, borrow and commit change nothing."""
    pol = Politeness(host_delay=2.0, ip_delay=0.5)
    a0, a1 = Workbench(client, "t:", pol, view="a0"), Workbench(client, "t:", pol, view="a1")
    a1.add_urls(["http://y.test/1", "http://y.test/2"], {"y.test": "127.0.0.3"})
    (y,), _ = a1.acquire(100.0, 1)
    client.set("t:v:a1:lease", "1")  # long lapsed
    f1 = RedisFrontier(client, "t:", view="a1", register=False)
    assert f1.fence() == 0.0
    fenced_at, longest = 100.5, 11.0
    assert f1.recover_view(fenced_at + longest, pol.host_delay, pol.ip_delay) == 1
    f1.move_hosts([("y.test", "a0")])
    assert a0.acquire(fenced_at + longest + pol.host_delay - 0.01, 1)[0] == []  # its request may be on the wire
    (again,), _ = a0.acquire(fenced_at + longest + pol.host_delay, 1)
    assert again == y
    a1.release([Release(*y[:2], end=200.0)])  # a1's fetcher was still alive: too late
    assert client.hget("t:hbusy", "y.test") == b"127.0.0.3"  # a0's request holds it still
    assert a1.acquire(1e9, 5)[0] == []
    assert a1.borrow("w.test", "127.0.0.9", "", 1e9) is not None
    with pytest.raises(Fenced):
        f1.commit(["y.test /1"], {"pages": 1})
    assert client.hexists("t:inflight", "y.test /1")  # a0's, uncommitted
    assert not client.hget("t:stats", "pages")


def test_membership_buries_only_after_the_lease_lapsed(client, redis_url) -> None:
    """The driver's fence waits out a dead agent's lease (it may still be renewed by a fetch actor
    that outlived its agent for a moment), then fences it."""
    Lease(redis_url, "t:", "a3", ttl=0.8, interval=10).renew()
    view = RedisFrontier(client, "t:", view="a3", register=False)
    t0 = time.monotonic()
    fenced = Membership._fence(view)
    assert time.monotonic() - t0 >= 0.6 and abs(fenced - time.time()) < 1
    assert client.exists("t:v:a3:fenced")


def test_longest_fetch_is_the_fetchers_bound() -> None:
    s = Settings(connect_timeout=2.0, read_timeout=3.0)
    f = Fetcher("ua", s.connect_timeout, s.read_timeout, 1000, 1000, NetworkPolicy(["127.0.0.0/8"]))
    assert longest_fetch(s) == f.total_timeout == 11.0


def test_the_fetcher_sends_nothing_through_a_closed_gate() -> None:
    """The gate is asked right before a request goes out: closed, nothing reaches the server and
    the result is the ``local`` kind the fetch loop puts back untouched."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text="ok")

    async def run() -> tuple[str | None, str | None]:
        app = web.Application()
        app.router.add_get("/{p}", handle)
        runner, port = await serve(app)
        f = Fetcher("ua", 2, 2, 1000, 1000, NetworkPolicy(["127.0.0.0/8"]))
        open_ = [True]
        f.gate = lambda: open_[0]
        try:
            a = await f.fetch(f"http://127.0.0.1:{port}/a", "127.0.0.1")
            open_[0] = False
            b = await f.fetch(f"http://127.0.0.1:{port}/b", "127.0.0.1")
        finally:
            await f.close()
            await runner.cleanup()
        return a.error, b.error

    assert asyncio.run(run()) == (None, LOCAL)
    assert seen == ["/a"]
