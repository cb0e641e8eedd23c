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
