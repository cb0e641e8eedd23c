"""The Redis workbench: politeness by construction, FIFO per host, nothing lost, crash recovery."""

from __future__ import annotations

import random

import pytest

from raycrawl.actors.frontier.workbench import ROBOTS, Release, Workbench, inflight_key, is_robots
from raycrawl.policies.politeness import Politeness
from raycrawl.servers import origin_of, server_of, split_server, url_of

ORIGINS = ("http://{}", "https://{}", "http://{}:8080", "https://{}:8443")


def make_web(rng: random.Random, hosts: int, ips: int, per_host: int) -> tuple[list[str], dict[str, str]]:
    """URLs of ``hosts`` servers on ``ips`` IPs, each server answering on both schemes and on a
    non-default port too: one server, one politeness schedule, whatever the origin."""
    ip_of = {f"h{i}.test": f"127.0.{i % ips}.1" for i in range(hosts)}
    urls = [ORIGINS[rng.randrange(4)].format(h) + f"/p{j}" for j in range(per_host) for h in ip_of]
    rng.shuffle(urls)
    return urls, ip_of



def simulate(wb: Workbench | list[Workbench], pol: Politeness, rng: random.Random, fetchers: int,
             crawl_delays: dict[str, float]):
    """Drive the workbench (or several agents' views of it, each with ``fetchers`` slots) with a
    virtual clock; check every start against an independent log."""
    wbs = wb if isinstance(wb, list) else [wb]
    fetchers *= len(wbs)
    now = 1000.0
    in_flight: list[tuple[float, str, str, str]] = []  # (end, host, ip, path)
    last_end_host: dict[str, float] = {}
    last_end_ip: dict[str, float] = {}
    fetched: list[tuple[str, str]] = []  # (server, entry)
    busy_hosts: set[str] = set()
    busy_ips: set[str] = set()
    while True:
        got, earliest = [], None
        for view in wbs:
            g, e = view.acquire(now, (fetchers - len(in_flight) - len(got)) // len(wbs) or 1)
            got += g
            earliest = e if earliest is None else min(earliest, e if e is not None else earliest)
        for host, ip, path in got:
            assert host not in busy_hosts and ip not in busy_ips, "two requests in flight"
            delay = pol.effective_host_delay(crawl_delays.get(host))
            assert now >= last_end_host.get(host, -1e9) + delay - 1e-6, "host delay violated"
            assert now >= last_end_ip.get(ip, -1e9) + pol.ip_delay - 1e-6, "IP delay violated"
            busy_hosts.add(host)
            busy_ips.add(ip)
            in_flight.append((now + rng.uniform(0.01, 0.5), host, ip, path))
        if not in_flight and earliest is None:
            return fetched
        in_flight.sort()
        next_end = in_flight[0][0] if in_flight else float("inf")
        if got and len(in_flight) < fetchers:
            continue
        if earliest is not None and earliest < next_end and len(in_flight) < fetchers:
            now = max(now, earliest)
            continue
        end, host, ip, path = in_flight.pop(0)
        now = end
        busy_hosts.discard(host)
        busy_ips.discard(ip)
        last_end_host[host] = end
        last_end_ip[ip] = end
        fetched.append((host, path))
        cd = crawl_delays.get(host) if is_robots(path) else None
        wbs[rng.randrange(len(wbs))].release(
            [Release(host, ip, end=end, crawl_delay=crawl_delays.get(host) if cd is None else cd)])


def test_politeness_fifo_and_completeness(client) -> None:
    rng = random.Random(3)
    pol = Politeness(host_delay=2.0, ip_delay=0.3, max_crawl_delay=3.0)
    wb = Workbench(client, "t:", pol)
    urls, ip_of = make_web(rng, hosts=40, ips=7, per_host=6)
    crawl_delays = {h: 10.0 for h in list(ip_of)[:5]}  # capped to 3 s
    seen: set[str] = set()
    for i in range(0, len(urls), 50):
        batch = urls[i : i + 50]
        new = {server_of(u) for u in batch} - seen
        wb.add_urls(batch, ip_of, new_hosts=new)
        seen |= new
    fetched = simulate(wb, pol, rng, fetchers=12, crawl_delays=crawl_delays)
    robots = [(h, e) for h, e in fetched if is_robots(e)]
    pages = [url_of(h, e) for h, e in fetched if not is_robots(e)]
    assert sorted(pages) == sorted(urls) and len(robots) == len(ip_of)
    for host in ip_of:  # robots first (of the first URL's origin), then the URLs in the order added
        mine = [url_of(h, e) for h, e in fetched if h == host]
        added = [u for u in urls if server_of(u) == host]
        assert mine[0] == origin_of(host, split_server(added[0])[1])[0] + ROBOTS
        assert mine[1:] == added
    assert not wb.frontier.idle()  # results not committed yet
    wb.frontier.commit([inflight_key(h, e) for h, e in fetched], {})
    assert wb.frontier.idle()


def test_agents_share_ip_politeness(client) -> None:
    """Three agents' views of one workbench; hosts of every IP are split among the agents, yet no
    IP (or host) ever has two requests in flight or a gap below its delay, and nothing is lost."""
    from raycrawl.policies.assignment import ConsistentHash

    rng = random.Random(5)
    pol = Politeness(host_delay=1.0, ip_delay=0.4)
    agents = ["a0", "a1", "a2"]
    views = {a: Workbench(client, "t:", pol, view=a) for a in agents}
    ring = ConsistentHash(agents)
    urls, ip_of = make_web(rng, hosts=30, ips=4, per_host=5)
    owners = {h: ring.owner(h) for h in ip_of}
    for ip in set(ip_of.values()):  # the test means something only if IPs are really shared
        assert len({owners[h] for h in ip_of if ip_of[h] == ip}) > 1
    for a, wb in views.items():
        mine = {h for h in ip_of if owners[h] == a}
        wb.add_urls([u for u in urls if server_of(u) in mine], ip_of, new_hosts=mine)
    for a, wb in views.items():  # each view's entries hold its own hosts only
        for ip in set(ip_of.values()):
            assert {h for h, _ in wb.entry(ip).ready_hosts} == {h for h in ip_of if ip_of[h] == ip and owners[h] == a}
    fetched = simulate(list(views.values()), pol, rng, fetchers=4, crawl_delays={})
    assert sorted(url_of(h, e) for h, e in fetched if not is_robots(e)) == sorted(urls)
    assert views["a0"].frontier.counts()["agents"] == 3


def test_release_of_untouched_host_keeps_times_and_putback_goes_first(client) -> None:
    pol = Politeness(host_delay=5.0, ip_delay=1.0)
    wb = Workbench(client, "t:", pol)
    wb.add_urls(["http://a.test/1", "http://a.test/2"], {"a.test": "127.0.0.2"})
    (got,), _ = wb.acquire(100.0, 10)
    assert got == ("a.test", "127.0.0.2", "/1")
    assert wb.acquire(100.0, 10)[0] == [], "host busy: nothing else may be handed out"
    wb.release([Release("a.test", "127.0.0.2", end=None, putback=(ROBOTS, "/1"))])
    vs = wb.visit_state("a.test")
    assert vs.queued == 3 and vs.next_fetch == 0 and not vs.busy
    order = []
    t = 100.0
    while True:
        got, earliest = wb.acquire(t, 1)
        if not got:
            if earliest is None:
                break
            t = earliest
            continue
        order.append(got[0][2])
        wb.release([Release("a.test", "127.0.0.2", end=t + 0.1)])
    assert order == [ROBOTS, "/1", "/2"]


def test_recover_requeues_in_flight(client) -> None:
    wb = Workbench(client, "t:", Politeness(host_delay=0, ip_delay=0))
    ip_of = {f"h{i}.test": f"127.0.0.{i % 3 + 1}" for i in range(6)}
    urls = [f"http://{h}/x{j}" for h in ip_of for j in range(3)]
    wb.add_urls(urls, ip_of)
    got, _ = wb.acquire(10.0, 10)
    assert len(got) == 3  # one per IP
    done = got[0]
    wb.release([Release(done[0], done[1], end=10.0)])
    wb.frontier.commit([inflight_key(done[0], done[2])], {"pages": 1})
    # crash with two URLs in flight
    assert wb.recover(10.0) == 2
    seen = [url_of(done[0], done[2])]
    while True:
        got, _ = wb.acquire(1e9, 10)
        if not got:
            break
        for host, ip, path in got:
            seen.append(url_of(host, path))
            wb.release([Release(host, ip, end=11.0)])
    assert sorted(seen) == sorted(urls)
    assert wb.frontier.stats() == {"pages": 1}


def test_recover_delays_every_host_and_ip_even_if_the_aof_lost_their_release(client) -> None:
    """A kill -9 may lose the last second of writes (appendfsync everysec): here the release of a
    fetched host is 'lost' (its next-fetch time is rolled back), yet after recovery no host or IP
    is handed out before a full delay from the restart."""
    pol = Politeness(host_delay=2.0, ip_delay=0.5)
    wb = Workbench(client, "t:", pol)
    ip_of = {f"h{i}.test": f"127.0.0.{i % 2 + 1}" for i in range(4)}
    wb.add_urls([f"http://{h}/p{j}" for h in ip_of for j in range(3)], ip_of)
    got, _ = wb.acquire(100.0, 10)
    wb.release([Release(h, ip, end=100.2) for h, ip, _ in got])
    wb.frontier.commit([inflight_key(h, p) for h, _, p in got], {"pages": len(got)})
    # Simulate the lost second: forget the next-fetch times the releases wrote.
    client.delete("t:hnext", "t:inext")
    restart = 100.3
    wb.recover(restart)
    assert wb.acquire(restart + pol.ip_delay - 0.01, 10)[0] == []
    got, _ = wb.acquire(restart + pol.host_delay, 10)
    assert got, "after a full delay hosts are ready again"
    for host in ip_of:
        assert wb.visit_state(host).next_fetch >= restart + pol.host_delay


def test_recover_view_requeues_only_that_agents_in_flight(client) -> None:
    """Agent a1's fetchers died with URLs in flight; a0 has one in flight too. recover_view of a1
    puts back a1's URLs only, frees their hosts and IPs after a full delay, and a0's request keeps
    its IP busy."""
    pol = Politeness(host_delay=2.0, ip_delay=0.5)
    a0, a1 = Workbench(client, "t:", pol, view="a0"), Workbench(client, "t:", pol, view="a1")
    a0.add_urls(["http://x.test/1"], {"x.test": "127.0.0.2"})
    a1.add_urls(["http://y.test/1", "http://y.test/2", "http://z.test/1"],
                {"y.test": "127.0.0.3", "z.test": "127.0.0.4"})
    assert len(a0.acquire(100.0, 10)[0]) == 1 and len(a1.acquire(100.0, 10)[0]) == 2
    assert a1.recover_view(100.5) == 2
    assert set(client.hkeys("t:inflight")) == {b"x.test /1"}
    assert client.smembers("t:ibusy") == {b"127.0.0.2"} and client.hkeys("t:hbusy") == [b"x.test"]
    assert a1.acquire(100.5 + pol.host_delay - 0.01, 10)[0] == []  # host delay from the recovery
    got, _ = a1.acquire(100.5 + pol.host_delay, 10)
    assert sorted(url_of(h, p) for h, _, p in got) == ["http://y.test/1", "http://z.test/1"]  # back in front, FIFO kept
    assert a0.acquire(1e9, 10)[0] == []  # a0's host is still in flight: not handed out again


def test_recover_view_frees_a_host_committed_but_not_released(client) -> None:
    """The agent commits a visit's outcome (its in-flight entry goes) while its fetch actor releases
    the host at its next round: an agent whose node died in between left the host, and its IP,
    busy with nothing in flight. recover_view frees and delays them (a crawl once never ended on
    it: benchmarks/machines.py, a node lost late), and leaves another agent's busy host alone."""
    pol = Politeness(host_delay=2.0, ip_delay=0.5)
    a0, a1 = Workbench(client, "t:", pol, view="a0"), Workbench(client, "t:", pol, view="a1")
    a0.add_urls(["http://x.test/1"], {"x.test": "127.0.0.2"})
    a1.add_urls(["http://y.test/1", "http://y.test/2"], {"y.test": "127.0.0.3"})
    assert len(a0.acquire(100.0, 10)[0]) == 1
    (y,), _ = a1.acquire(100.0, 10)
    a1.frontier.commit([inflight_key(y[0], y[2])], {"pages": 1})  # committed; the release never came
    assert client.hkeys("t:inflight") == [b"x.test /1"] and client.hexists("t:hbusy", "y.test")
    assert a1.recover_view(100.5) == 0  # nothing was in flight...
    assert client.hkeys("t:hbusy") == [b"x.test"] and client.smembers("t:ibusy") == {b"127.0.0.2"}  # ...y.test freed
    assert a1.acquire(100.5 + pol.host_delay - 0.01, 10)[0] == []  # a full delay from the recovery
    got, _ = a1.acquire(100.5 + pol.host_delay, 10)
    assert [url_of(h, p) for h, _, p in got] == ["http://y.test/2"]


def test_borrow_is_polite_released_like_an_acquire_and_freed_by_recover_view(client) -> None:
    """A robots.txt redirect hop to another host borrows it (storage/lua/borrow.lua): only when the
    host and its IP are due, never twice at once; a release moves its next fetch; and if the
    borrowing agent's fetchers die with the hop in flight, recover_view frees it."""
    pol = Politeness(host_delay=2.0, ip_delay=0.5)
    a0, a1 = Workbench(client, "t:", pol, view="a0"), Workbench(client, "t:", pol, view="a1")
    a0.add_urls(["http://x.test/1"], {"x.test": "127.0.0.2"})
    a1.add_urls(["http://y.test/1"], {"y.test": "127.0.0.3"})
    (x,), _ = a0.acquire(100.0, 1)
    assert a0.borrow("y.test", "127.0.0.3", "127.0.0.2", 100.0) is None  # due: taken
    assert a0.borrow("y.test", "127.0.0.3", "127.0.0.2", 100.0) is not None  # busy: not twice
    assert a1.acquire(100.0, 1)[0] == []  # its owner cannot take it meanwhile (its IP is busy)
    a0.release([Release("y.test", "127.0.0.3", end=100.2), Release(*x[:2], end=100.2)])
    assert a0.borrow("y.test", "127.0.0.3", "127.0.0.2", 101.0) == pytest.approx(102.2)  # host delay
    # the held IP itself is no obstacle: two names on one address, the hop goes out at once
    a0.add_urls(["http://x.test/2"], {"x.test": "127.0.0.2"})
    (x2,), _ = a0.acquire(200.0, 1)
    assert a0.borrow("w.test", "127.0.0.2", "127.0.0.2", 200.0) is None
    assert a1.recover_view(200.5) == 0 and client.hexists("t:hbusy", "w.test")  # not a1's
    assert a0.recover_view(200.5) == 2  # x.test/1 and /2 (never committed) back; borrowed w.test freed
    assert not client.hexists("t:hbusy", "w.test") and not client.hlen("t:borrowed")
    assert a0.borrow("w.test", "127.0.0.2", "", 200.5 + pol.host_delay - 0.01) is not None
    assert a0.borrow("w.test", "127.0.0.2", "", 200.5 + pol.host_delay) is None


def test_move_hosts_hands_queued_and_busy_hosts_to_the_new_owner(client) -> None:
    """Shards changing owner (actors/cluster/membership.py): a0's idle host with URLs and its host in flight
    move to a1. a1 then gets both, a0 neither; the busy one only after its release, and the host
    delay set by that release still holds."""
    from raycrawl.policies.assignment import SHARDS, apply_shards, shard_of

    pol = Politeness(host_delay=2.0, ip_delay=0.0)
    a0, a1 = Workbench(client, "t:", pol, view="a0"), Workbench(client, "t:", pol, view="a1")
    a0.add_urls(["http://x.test/1", "http://x.test/2", "http://y.test/1"],
                {"x.test": "127.0.0.2", "y.test": "127.0.0.3"})
    (busy,), _ = a0.acquire(100.0, 1)
    idle = "y.test" if busy[0] == "x.test" else "x.test"
    shards = dict.fromkeys(range(SHARDS), "a0")
    shards[shard_of("x.test")] = shards[shard_of("y.test")] = "a1"
    assert apply_shards(a0.frontier, shards) == 2
    assert a0.frontier.front_size() == 0 and a0.acquire(1e9, 10)[0] == []
    got, _ = a1.acquire(100.0, 10)
    assert [h for h, _, _ in got] == [idle]
    a0.release([Release(busy[0], busy[1], end=100.5)])  # the old owner's fetcher finishes its request
    assert a0.acquire(1e9, 10)[0] == []
    if busy[0] == "x.test":
        assert a1.acquire(100.5 + pol.host_delay - 0.01, 10)[0] == []
        assert [h for h, _, _ in a1.acquire(100.5 + pol.host_delay, 10)[0]] == ["x.test"]
    assert {v.decode() for v in client.smembers("t:views")} == {"t:v:a0:", "t:v:a1:"}
    apply_shards(a0.frontier, dict.fromkeys(range(SHARDS), "a1"))  # a0 left
    assert {v.decode() for v in client.smembers("t:views")} == {"t:v:a1:"}


def test_retried_release_and_commit_apply_once(client) -> None:
    """What a client retries after a Redis restart lost the reply must not apply twice: a release
    (with a URL put back) and a commit (its counters)."""
    pol = Politeness(host_delay=0.0, ip_delay=0.0)
    wb = Workbench(client, "t:", pol)
    wb.add_urls(["http://x.test/1", "http://x.test/2"], {"x.test": "127.0.0.2"})
    (got,), _ = wb.acquire(100.0, 1)
    rel = [Release(got[0], got[1], end=None, putback=(got[2],))]
    assert wb.release(rel) == [2]
    assert wb.release(rel) == [-1]
    assert wb.frontier.queue_lengths(["x.test"]) == [2]
    assert wb.frontier.commit([], {"pages": 3}, token="t1") and not wb.frontier.commit([], {"pages": 3}, token="t1")
    assert wb.frontier.stats()["pages"] == 3


@pytest.mark.parametrize("pol", [Politeness(host_delay=2.0, ip_delay=0.5, max_crawl_delay=30.0),
                                 Politeness(host_delay=0.1, ip_delay=0.0, max_crawl_delay=3.0),
                                 Politeness(host_delay=0.0, ip_delay=1.5, max_crawl_delay=0.0)])
@pytest.mark.parametrize("view_only", [False, True])
def test_the_lua_wait_after_a_crash_is_the_python_rule(client, pol: Politeness, view_only: bool) -> None:
    """storage/lua/_delay.lua mirrors policies/politeness.py for the wait after a crash: every host
    waits effective_host_delay(its Crawl-delay) from the restart and its IP waits ip_delay, for
    Crawl-delays below, between and above the host delay and the cap (recover and recover_view)."""
    wb = Workbench(client, "t:", pol, view="a0")
    delays = [None, 0.0, 0.05, 1.0, 2.5, 10.0, 1000.0]
    ip_of = {f"h{i}.test": f"127.0.{i}.1" for i in range(len(delays))}
    wb.add_urls([f"http://{h}/p{j}" for h in ip_of for j in range(2)], ip_of)
    got, _ = wb.acquire(100.0, 100)
    assert len(got) == len(delays)
    wb.release([Release(h, ip, end=100.0, crawl_delay=delays[i]) for i, (h, ip, _) in enumerate(sorted(got))])
    got, _ = wb.acquire(1e6, 100)  # every host in flight again at the crash
    assert len(got) == len(delays)
    restart = 2e6
    (wb.recover_view if view_only else wb.recover)(restart)
    for i, host in enumerate(sorted(ip_of)):
        state = wb.visit_state(host)
        assert state.next_fetch == pytest.approx(restart + pol.effective_host_delay(delays[i])), (host, delays[i])
        assert wb.entry(ip_of[host]).next_fetch == pytest.approx(restart + pol.ip_delay)
