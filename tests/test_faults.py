"""Faults a long crawl meets (issue 20), each measured against websim's request log and manifest,
never against the crawler's own counters: Redis killed under a running crawl (the embedded one is
restarted by raycrawl; an external one that stays away stops the crawl with one line, and
--resume continues it), and damaged crawl state (refused with one line naming the file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
WEB = {"hosts": 40, "ips": 6, "seed": 5, "pages_per_host_mean": 8}
HOST_DELAY, IP_DELAY = 0.1, 0.02


def crawl_cmd(web, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
            "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
            "--host-delay", str(HOST_DELAY), "--ip-delay", str(IP_DELAY), "--max-urls-per-host", "60", *extra]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), **extra}


def start_until(web, cmd: list[str], pages: int, **extra_env: str) -> subprocess.Popen:
    """Start a crawl (own process group) and return once websim has answered ``pages`` requests."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(**extra_env), cwd=ROOT,
                            start_new_session=True)
    deadline = time.time() + 180
    while len(web.requests()) < pages:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "the crawl made no progress"
        time.sleep(0.1)
    return proc


def freeze_in_flight(url: str) -> set[str]:
    """Stop Redis taking writes (CLIENT PAUSE) and read its in-flight set: exactly what it holds
    in flight when it is killed right after."""
    client = redis.Redis.from_url(url)
    try:
        client.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
        return {k.decode() for k in client.hkeys("rc:inflight")}
    finally:
        client.close()


def fetched_twice(audit) -> set[str]:
    return {v.key for v in audit.violations if v.kind == "duplicate"}


def check_crawl(out: Path, web, audit, in_flight: set[str]) -> None:
    """0 URLs lost (websim's manifest), refetches only among the URLs Redis held in flight, no
    politeness, robots or unlinked violation (websim's log), a finished crawl."""
    twice = fetched_twice(audit)
    assert twice <= in_flight, sorted(twice - in_flight)[:10]
    others = [v for v in audit.violations if v.kind != "duplicate"]
    assert not others, audit.summary()
    assert json.loads((out / "report.json").read_text())["stopped"] == "frontier empty"
    urls = {r["url"] for r in iter_link_records(out)}
    manifest = web.manifest
    missing = {u for u in manifest.reachable() if manifest.allowed(u)} - urls
    assert len(missing) <= 0.05 * len(urls), sorted(missing)[:10]  # the per-host cap, as in test_crawl


def canonical_in_flight(in_flight: set[str]) -> set[str]:
    """In-flight keys as the audit names URLs (they are canonical URLs already; kept explicit)."""
    return {u for u in in_flight if urlsplit(u).scheme in ("http", "https")}


@pytest.mark.slow
def test_embedded_redis_killed_under_two_agents_is_restarted(tmp_path: Path) -> None:
    """kill -9 of the embedded valkey-server while two agents crawl: raycrawl restarts it from its
    AOF, the crawl pauses and goes on to the end in the same run; nothing is lost, only URLs Redis
    held in flight are fetched again, politeness holds across the restart."""
    from websim import Websim

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
    from websim import Websim

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
