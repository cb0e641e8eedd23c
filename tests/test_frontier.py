"""Sieve → distributor → workbench (+ virtualizer): every URL once, per-host FIFO, bounded Redis."""

from __future__ import annotations

import random

from raycrawl.actors.frontier.distributor import Distributor
from raycrawl.actors.frontier.sieve_shards import SieveShards
from raycrawl.actors.frontier.virtualizer import Virtualizer
from raycrawl.actors.frontier.workbench import ROBOTS, Release, Workbench
from raycrawl.policies.assignment import SHARDS
from raycrawl.policies.politeness import Politeness
from raycrawl.servers import server_of, url_of


def test_distribution_with_virtualizer(client, tmp_path) -> None:
    rng = random.Random(11)
    hosts = [f"s{i}.test" for i in range(12)] + ["nxdomain.test"]  # servers, each on http and https
    stream = [f"{rng.choice(('http', 'https'))}://{rng.choice(hosts)}/p{rng.randrange(60)}" for _ in range(3000)]
    dns = {h: f"127.0.{i % 4}.1" for i, h in enumerate(hosts[:-1])}
    dns["s11.test"] = "10.1.2.3"  # forbidden by the network policy below
    sieve = SieveShards(tmp_path / "sieve", range(SHARDS), batch_size=200)
    for i in range(0, len(stream), 100):
        sieve.enqueue(stream[i : i + 100])
    wb = Workbench(client, "t:", Politeness(host_delay=0, ip_delay=0))
    virt = Virtualizer(tmp_path / "virt", wb.frontier, budget=6)
    resolved: list[str] = []

    def resolve(names):
        resolved.extend(names)
        return {n: dns.get(n) for n in names}

    dist = Distributor(wb, virt, front_size=1000, max_urls_per_host=40, batch=37,
                       allows=lambda ip: ip.startswith("127."))
    fetched: list[tuple[str, str]] = []  # (server, URL or origin + robots marker)
    failed: list[tuple[str, str]] = []
    over = 0
    max_len = 0
    while True:
        res = dist.step(sieve.read_front, resolve)
        failed += res.failed
        over += res.over_host_limit
        got, _ = wb.acquire(1e12, 3)
        for host, ip, path in got:
            fetched.append((host, url_of(host, path)))
            wb.release([Release(host, ip, end=1.0)])
        max_len = max([max_len] + [wb.frontier.queue_length(h) for h in hosts])
        if not got and res.taken == 0 and res.refilled == 0 and sieve.exhausted(wb.frontier.sieve_offsets(dist.queues)):
            break
    first_seen = list(dict.fromkeys(stream))
    assert virt.spilled > 0 and virt.refilled == virt.spilled
    assert max_len <= 6 + 1  # budget (+ the robots marker)
    queued_names = [n for n in resolved if n not in ("nxdomain.test", "s11.test")]
    assert len(queued_names) == len(set(queued_names)) == 11, "a queued host was resolved twice"
    pages = [u for _, u in fetched if not u.endswith(ROBOTS)]
    assert len(pages) == len(set(pages))
    for h in hosts:
        mine = [u for u in first_seen if server_of(u) == h]
        if h in ("nxdomain.test", "s11.test"):
            kind = "dns" if "nxdomain" in h else "forbidden-network"
            assert sorted(u for u, k in failed if k == kind) == sorted(mine)
            continue
        got_h = [u for s, u in fetched if s == h]
        assert got_h[0] == mine[0].split("/")[0] + "//" + h + ROBOTS  # robots.txt of the first URL's origin
        assert got_h[1:] == mine[:40], h  # first-seen order, capped at max_urls_per_host
    assert over == sum(max(0, len([u for u in first_seen if server_of(u) == h]) - 40) for h in hosts[:11])
    assert not list(virt.dir.glob("*.q")), "drained virtual queues are deleted"


def test_failures_of_a_dead_agent_are_recorded_by_another_once(client, tmp_path) -> None:
    """The distributor's step moves the sieve's offsets past URLs it cannot schedule (no DNS
    answer, a forbidden network) and, in the same transaction, marks them failing for its agent.
    That agent dies before the commit of their records: they become orphans, which exactly one
    other agent claims; its commit of their records forgets them. A crawl resumed after a crash
    orphans every view's."""
    from raycrawl.storage.redis_frontier import RedisFrontier

    client.flushall()
    stream = [f"http://gone{i % 3}.test/p{i}" for i in range(30)] + [f"http://far.test/q{i}" for i in range(5)]
    sieve = SieveShards(tmp_path / "sieve", range(SHARDS), batch_size=200)
    sieve.enqueue(stream)
    wb = Workbench(client, "t:", Politeness(host_delay=0, ip_delay=0), view="a")
    dist = Distributor(wb, Virtualizer(tmp_path / "virt", wb.frontier, budget=6), front_size=1000, batch=100,
                       allows=lambda ip: ip.startswith("127."))
    failed = []
    while not sieve.exhausted(wb.frontier.sieve_offsets(dist.queues)):
        failed += dist.step(sieve.read_front, lambda names: {n: "10.0.0.1" if n == "far.test" else None for n in names}).failed
    expected = {(u, "forbidden-network" if "far" in u else "dns") for u in stream}
    assert set(failed) == expected
    a, b, c = (RedisFrontier(client, "t:", view=v) for v in "abc")
    assert a.counts()["failing"] == len(stream)
    assert b.claim_failing(100) == [], "a's failures are a's while it lives"
    assert a.orphan_failing() == len(stream)  # a died
    got = b.claim_failing(20) + b.claim_failing(100)
    assert sorted(got) == sorted(expected) and c.claim_failing(100) == []
    assert b.orphan_failing() == len(stream)  # b died before its commit: c records them
    mine = c.claim_failing(100)
    assert sorted(mine) == sorted(expected)
    c.commit([u for u, _ in mine[:10]], {"pages": 10})
    assert c.counts()["failing"] == len(stream) - 10
    assert a.orphan_failing(every_view=True) == len(stream) - 10  # a crash, then --resume
    c.commit([u for u, _ in b.claim_failing(100)], {"pages": len(stream) - 10})
    assert c.counts()["failing"] == 0 and not c.claim_failing(100)


def test_a_fenced_view_distributes_nothing(client, tmp_path) -> None:
    """An agent declared departed (fence.lua) that still runs moves no sieve offset and queues no
    URL, even when the fence lands during its step (between its read of the offsets and its
    transaction): its shards' successors distribute those URLs from the offsets Redis holds."""
    client.flushall()
    sieve = SieveShards(tmp_path / "sieve", range(SHARDS), batch_size=200)
    sieve.enqueue([f"http://h{i % 5}.test/p{i}" for i in range(50)])
    wb = Workbench(client, "t:", Politeness(host_delay=0, ip_delay=0), view="a")
    dist = Distributor(wb, Virtualizer(tmp_path / "virt", wb.frontier, budget=100), front_size=1000, batch=20)
    before = wb.frontier.sieve_offsets(dist.queues)

    def fenced_meanwhile(names):
        client.set("t:v:a:fenced", "1")
        return {n: "127.0.0.1" for n in names}

    res = dist.step(sieve.read_front, fenced_meanwhile)
    assert res.queued == 0 and wb.frontier.sieve_offsets(dist.queues) == before
    assert dist.step(sieve.read_front, fenced_meanwhile).taken == 0  # fenced before the step
    assert wb.frontier.sieve_offsets(dist.queues) == before and wb.frontier.counts()["queued"] == 0
    client.delete("t:v:a:fenced")  # (the same view, not fenced: the URLs are there to distribute)
    assert dist.step(sieve.read_front, lambda names: {n: "127.0.0.1" for n in names}).taken == 20


def test_distributor_step_cut_by_a_redis_restart_is_dropped_not_doubled(tmp_path) -> None:
    """Redis restarts (AOF flushed) between the distributor's read of the sieve and its transaction:
    the retrying client reconnects, the WATCH on the shard offsets is lost, so the step is dropped
    and the next one queues the same URLs — each exactly once."""
    from raycrawl.redis_server import EmbeddedRedis, connect

    hosts = [f"s{i}.test" for i in range(6)]
    urls = [f"{('http', 'https')[j % 2]}://{h}/p{j}" for j in range(5) for h in hosts]
    with EmbeddedRedis(tmp_path / "redis") as server:
        client = connect(server.url, wait=30)
        sieve = SieveShards(tmp_path / "sieve", range(SHARDS))
        sieve.enqueue(urls)
        wb = Workbench(client, "t:", Politeness(host_delay=0, ip_delay=0))
        dist = Distributor(wb, Virtualizer(tmp_path / "virt", wb.frontier, budget=100), front_size=1000)
        restarts = []

        def read_then_restart(offsets, n, levels, bias):
            got = sieve.read_front(offsets, n, levels, bias)
            if not restarts:
                server.stop()
                server.start()
                restarts.append(1)
            return got

        resolve = lambda names: dict.fromkeys(names, "127.0.0.2")  # noqa: E731
        first = dist.step(read_then_restart, resolve)
        assert restarts and first.taken == 0 and wb.frontier.counts()["queued"] == 0
        while not sieve.exhausted(wb.frontier.sieve_offsets(dist.queues)):
            dist.step(sieve.read_front, resolve)
        queued = [url_of(h, p.decode()) for h in hosts for p in client.lrange("t:vs:" + h, 0, -1)]
        assert sorted(u for u in queued if not u.endswith(ROBOTS)) == sorted(urls)
        client.close()


def test_status_tells_a_running_crawl_from_a_stopped_one(client, redis_url) -> None:
    """The state of a crawl in an external Redis outlives it: ``raycrawl status --redis-url`` says
    running only while the crawl's heartbeat (actors/cluster/heartbeat.py) is fresh — beating, taken back
    when the run ends, and old when the crawl died without a word; a fresh crawl's clearing of its
    keys keeps it."""
    import json
    import subprocess
    import sys
    import time
    from pathlib import Path

    from raycrawl.actors.cluster.heartbeat import TTL, Heartbeat
    from raycrawl.storage.redis_frontier import RedisFrontier

    f = RedisFrontier(client, "hb:", register=False)
    f.start_crawl("c1", "{}", time.time())

    def running() -> bool:
        st = subprocess.run([sys.executable, "-m", "raycrawl", "status", "--redis-url", redis_url, "--prefix", "hb:",
                             "--json", "--interval", "0"], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[1])
        assert st.returncode == 0, st.stderr
        return json.loads(st.stdout)["running"]

    assert not running() and f.alive(TTL) == []
    beat = Heartbeat(redis_url, "hb:", "driver").start()
    time.sleep(2.5)  # past a beat interval: still beating
    assert f.alive(TTL) == ["driver"] and running()
    f.clear()  # a fresh crawl begins: its own heartbeat stays
    assert f.alive(TTL) == ["driver"]
    f.start_crawl("c1", "{}", time.time())
    beat.stop()
    assert f.alive(TTL) == [] and not running()
    f.beat("driver")  # a crawl killed after its last beat: its key stays, its time grows old
    assert f.alive(TTL) == ["driver"] and running()
    time.sleep(0.5)
    assert f.alive(0.4) == [] and f.alive(TTL) == ["driver"]
    sec, _ = client.time()
    client.set("hb:alive:driver", f"{int(sec - TTL) - 1}.000000")  # its last beat, longer ago than a beat lasts
    assert f.alive(TTL) == [] and not running()
