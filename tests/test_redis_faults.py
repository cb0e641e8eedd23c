"""Redis dying under a running crawl (issue 20): the embedded one is restarted by raycrawl; an
external one that stays away stops the crawl with one line, and --resume continues it. Measured
against websim's request log and manifest."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
from fault_crawl import (
    HOST_DELAY,
    IP_DELAY,
    ROOT,
    WEB,
    canonical_in_flight,
    check_crawl,
    crawl_cmd,
    env,
    freeze_in_flight,
    start_until,
)


@pytest.mark.slow
def test_embedded_redis_killed_under_two_agents_is_restarted(tmp_path: Path) -> None:
    """kill -9 of the embedded valkey-server while two agents crawl: raycrawl restarts it from its
    AOF, the crawl pauses and goes on to the end in the same run; nothing is lost, only URLs Redis
    held in flight are fetched again, politeness holds across the restart."""
    from raycrawl.websim import Websim

    out = tmp_path / "crawl"
    with Websim(**WEB, out_dir=tmp_path / "web") as web:
        proc = start_until(web, crawl_cmd(web, out, "--agents", "2"), pages=80)
        url = (out / "redis-url").read_text().strip()
        in_flight = freeze_in_flight(url)
        os.kill(int((out / "redis" / "redis.pid").read_text()), signal.SIGKILL)
        at_kill = len(web.requests())
        _, err = proc.communicate(timeout=400)
        err = err.decode()
        assert proc.returncode == 0, err[-3000:]
        assert "restarting it from its AOF" in err and "embedded Redis is back" in err, err[-3000:]
        assert len(web.requests()) > at_kill + 50  # the crawl went on after the restart
        check_crawl(out, web, web.audit(HOST_DELAY, IP_DELAY), canonical_in_flight(in_flight))


@pytest.mark.slow
def test_external_redis_gone_stops_with_one_line_then_resume(tmp_path: Path) -> None:
    """An external Redis (--redis-url) killed and not restarted: the crawl waits
    RAYCRAWL_REDIS_WAIT seconds, then stops with one line (exit 2, no traceback); once Redis is
    back, --resume finishes the crawl with nothing lost and refetches only among the in-flight."""
    from raycrawl.redis_server import EmbeddedRedis
    from raycrawl.websim import Websim

    out = tmp_path / "crawl"
    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        with Websim(**WEB, out_dir=tmp_path / "web") as web:
            cmd = crawl_cmd(web, out, "--redis-url", server.url)
            proc = start_until(web, cmd, pages=80, RAYCRAWL_REDIS_WAIT="5")
            in_flight = freeze_in_flight(server.url)
            server.kill()
            t0 = time.time()
            _, err = proc.communicate(timeout=300)
            err = err.decode()
            lines = err.strip().splitlines()
            assert proc.returncode == 2 and "Traceback" not in err, err[-3000:]
            assert time.time() - t0 < 120
            assert "did not answer for 5 s" in lines[-1] and "--resume" in lines[-1], lines[-1]
            assert sum(x.startswith("raycrawl crawl: error:") for x in lines) == 1
            assert "is not answering" in err  # the wait was announced
            server = EmbeddedRedis(tmp_path / "redis", port=server.port).start()
            assert freeze_in_flight(server.url) == in_flight  # AOF: nothing committed was lost
            redis.Redis.from_url(server.url).execute_command("CLIENT", "UNPAUSE")
            proc = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=400, env=env(),
                                  cwd=ROOT)
            assert proc.returncode == 0, proc.stderr[-3000:]
            check_crawl(out, web, web.audit(HOST_DELAY, IP_DELAY), canonical_in_flight(in_flight))
    finally:
        server.stop()


# --- one write across a restart: applied once or not at all ------------------------------------------
# The client's write is held by CLIENT PAUSE WRITE after redis-py checked the pipeline's scripts
# (SCRIPT EXISTS), then the server restarts from its AOF with an empty script cache, and the client's
# retry sends the write to the new server: the moment a restart under a crawl can hit.

def _restart_under(server, client_call):
    """Run ``client_call`` in a thread while Redis holds writes, restart the server once a write of
    the call is held, and return what the call returned or raised."""
    import threading

    admin = redis.Redis.from_url(server.url)
    admin.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(client_call())
        except Exception as exc:  # noqa: BLE001 - the test reports it
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while time.time() < deadline and not any("b" in c["flags"] for c in admin.client_list()):
        time.sleep(0.01)  # until the call is held (flag b: postponed by the pause)
    assert time.time() < deadline, "the call never reached Redis"
    admin.close()
    server.stop()
    server.start()
    thread.join(60)
    assert outcome, "the call did not come back after the restart"
    return outcome[0]


def test_virtual_queue_refill_across_a_restart_loses_nothing(tmp_path: Path) -> None:
    """A refill held at its EXEC when Redis restarts: after it and the refills that follow, the
    visit state holds every spilled URL once, in order (it once lost them: the transaction applied
    its offset move without its NOSCRIPT-failed script)."""
    from raycrawl.actors.frontier.virtualizer import Virtualizer
    from raycrawl.redis_server import EmbeddedRedis, connect
    from raycrawl.storage.redis_frontier import RedisFrontier

    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        f = RedisFrontier(connect(server.url), "t:", view="agent0")
        virt = Virtualizer(tmp_path / "virt", f, budget=2)
        host, ip, paths = "http://a.test:1", "127.0.0.2", [f"/p{i}" for i in range(7)]
        f.add([("http://b.test:1", ip, ["/warm"])])  # the add script in the server's cache
        with f.r.pipeline(transaction=True) as pipe:
            virt.spill(host, paths, pipe)
            pipe.execute()
        got = _restart_under(server, lambda: virt.refill(host, ip, 3))
        assert not isinstance(got, Exception), repr(got)
        while virt.virtualized([host])[0]:
            virt.refill(host, ip, 3)
        assert [p.decode() for p in f.r.lrange(f.k.visit_state(host), 0, -1)] == paths
    finally:
        server.stop()


def test_release_and_acquire_across_a_restart(tmp_path: Path) -> None:
    """The fetchers' one round trip (a pipeline of two scripts) held when Redis restarts: it
    completes on the new server (it raised NOSCRIPT), and every URL is queued or in flight once."""
    from raycrawl.actors.frontier.workbench import inflight_key
    from raycrawl.redis_server import EmbeddedRedis, connect
    from raycrawl.storage.redis_frontier import RedisFrontier

    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        f = RedisFrontier(connect(server.url), "t:", view="agent0")
        hosts = [f"h{i}.test" for i in range(3)]  # servers; entries ":1/a" are http://h0.test:1/a
        f.add([(h, f"127.0.0.{i + 2}", [":1/a", ":1/b"]) for i, h in enumerate(hosts)])
        (got, _) = f.acquire(time.time(), 1)
        (host, ip, path), = got
        got = _restart_under(server, lambda: f.release_and_acquire([(host, ip, 0.0, 0.0, [path])], time.time(), 3))
        assert not isinstance(got, Exception), repr(got)
        queued = [inflight_key(h, p.decode()) for h in hosts for p in f.r.lrange(f.k.visit_state(h), 0, -1)]
        inflight = [k.decode() for k in f.r.hkeys(f.k.inflight)]
        assert sorted(queued + inflight) == sorted(inflight_key(h, p) for h in hosts for p in (":1/a", ":1/b"))
        assert sorted(inflight) == sorted(inflight_key(h, p) for h, _, p in got[0])
    finally:
        server.stop()


def test_embedded_redis_waits_while_a_large_aof_loads(tmp_path: Path, caplog) -> None:
    """Loading takes as long as the crawl is large: start-up waits while the load progresses (here
    ~5 s, slowed per key by the server's own test option) however short the no-answer timeout."""
    import logging

    import redis as redis_py

    from raycrawl.redis_server import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis").start()
    client = redis_py.Redis.from_url(server.url)
    for b in range(0, 30_000, 5_000):
        client.mset({f"k{i}": i for i in range(b, b + 5_000)})
    client.bgrewriteaof()
    # Until the keys are in the rewritten (RDB-preamble) base file, whose loading the option slows:
    # a rewrite asked while the server's first one still runs is only *scheduled*, and stopping then
    # left the keys as MSET commands, replayed at once (a loaded run saw no loading, and failed).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
            break
        time.sleep(0.1)
    client.close()
    server.stop()
    slow = EmbeddedRedis(tmp_path / "redis", options=("--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"))
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="raycrawl.redis_server"):
        # (2 s: a server process that starts on a loaded machine may not listen within 0.5 s)
        slow.start(timeout=2.0)
    try:
        assert time.monotonic() - began > 2.0  # it did load slowly (~5 s), past the 2 s timeout
        assert "loading its data" in caplog.text
        assert redis_py.Redis.from_url(slow.url).dbsize() == 30_000
    finally:
        slow.stop()


def test_a_full_disk_under_the_embedded_redis_is_a_refusal_not_a_restart_loop(tmp_path: Path) -> None:
    """Under ``appendfsync always`` Valkey exits when the disk refuses an AOF write (it cannot
    answer it). The supervisor restarts it once, so that the next write is refused with MISCONF
    (the crawl's one-line stop, core/stops.py) instead of an exit at every write, and a script
    call sees that refusal, not NOSCRIPT from one restart too many. Nothing it answered under
    ``always`` is lost (one write answered after the restart may be: the disk still full, it is
    not on disk, which a resume's consistency check reports, docs/crawling.md)."""
    from raycrawl.redis_server import EmbeddedRedis, connect
    from raycrawl.stops import storage_failure
    from raycrawl.storage.redis_frontier import RedisFrontier

    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)], capture_output=True, text=True)
    if mount.returncode != 0:  # a real full disk is the point: no stand-in
        pytest.fail(f"this test mounts a tmpfs (needs root): {mount.stderr.strip()}")
    server = EmbeddedRedis(disk / "redis", supervise=True)
    try:
        server.start()
        f = RedisFrontier(connect(server.url, wait=30), "t:", view="agent0")
        answered: list[str] = []
        with pytest.raises(redis.RedisError) as failed:
            for i in range(10_000):
                f.add([(f"h{i}.test", "127.0.0.2", ["/" + "x" * 2000])])  # a script, as the crawl writes
                if not server.deaths:  # (answered by the first server: under appendfsync always)
                    answered.append(f"h{i}.test")
        stop = storage_failure(failed.value)
        assert stop is not None and "MISCONF" in str(stop), repr(failed.value)
        assert server.aof_failed and server.proc is not None and server.proc.poll() is None
        f.r.close()
    finally:
        server.stop()
        subprocess.run(["mount", "-o", "remount,size=50m", str(disk)], check=True)
    again = EmbeddedRedis(disk / "redis").start()  # (appendfsync always again)
    try:
        f = RedisFrontier(connect(again.url), "t:", view="agent0")
        assert answered and all(f.r.exists(f.k.visit_state(h)) for h in answered)
        assert f.r.config_get("appendfsync") == {"appendfsync": "always"}
    finally:
        again.stop()
        subprocess.run(["umount", str(disk)], check=False)
