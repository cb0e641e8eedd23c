"""One crawl per directory (storage/crawl_dir.py): the lock is exclusive, taken before anything
starts, released by the kernel when its owner dies; --resume refuses a Redis that is not the crawl's."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import (
    CrawlDirLock,
    agent_workers_gone,
    new_crawl_id,
    read_crawl_id,
    wait_for_workers,
)

HOLD = """
import sys, time
from raycrawl.storage.crawl_dir import CrawlDirLock
CrawlDirLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""

WORKER = """
import sys, time
from raycrawl.storage.crawl_dir import join_run
join_run(sys.argv[1], *sys.argv[2:])
print("locked", flush=True)
time.sleep(600)
"""


def _holder(out: Path, code: str = HOLD, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, str(out), *args], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_lock_is_exclusive_and_dies_with_its_owner(tmp_path):
    out = tmp_path / "crawl"
    proc = _holder(out)
    try:
        with pytest.raises(UserError, match=f"in use by a running crawl \\(pid {proc.pid}"):
            CrawlDirLock(out).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with CrawlDirLock(out):  # the kernel released it with the process
        pass
    with CrawlDirLock(out):  # and a released lock can be taken again
        pass


def test_second_crawl_refused_before_starting_anything(tmp_path):
    out = tmp_path / "crawl"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    (out / "sieve").mkdir(parents=True)  # what a running crawl's directory holds (for --resume)
    proc = _holder(out)
    try:
        for extra in ([], ["--resume"]):
            t0 = time.monotonic()
            run = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(seeds), "--out", str(out),
                                  *extra], capture_output=True, text=True, timeout=120)
            assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
            assert "in use by a running crawl" in run.stderr and len(run.stderr.strip().splitlines()) == 1
            assert time.monotonic() - t0 < 30
            assert not (out / "redis").exists() and not (out / "redis-url").exists()  # no Redis was started
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_out_that_cannot_be_a_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot use"):
        CrawlDirLock(blocker / "sub").acquire()


def test_crawl_id_round_trip(tmp_path):
    assert read_crawl_id(tmp_path) is None
    cid = new_crawl_id(tmp_path)
    assert read_crawl_id(tmp_path) == cid and len(cid) == 32 and new_crawl_id(tmp_path) != cid


def test_the_next_run_waits_for_a_killed_runs_workers(tmp_path):
    """A worker of a killed run (a Ray actor outlives its process group by seconds) still holds
    OUT/.workers: taking the directory waits for it, and says who to look for when it does not end."""
    out = tmp_path / "crawl"
    worker = _holder(out, WORKER)
    try:
        with pytest.raises(UserError, match="earlier run still work in .*fuser -v"):
            wait_for_workers(out, timeout=0.3)
        t0 = time.time()
        subprocess.Popen([sys.executable, "-c", f"import os, signal, time; time.sleep(1); os.kill({worker.pid}, 9)"])
        with CrawlDirLock(out):
            # the kernel drops a killed process's locks as it exits, a moment before it can be reaped
            assert time.time() - t0 >= 0.9 and worker.wait(timeout=10) == -9  # it waited for the worker to die
        wait_for_workers(out, timeout=0.1)  # nobody left
        join, join2 = _holder(out, WORKER), _holder(out, WORKER)  # one run's workers share the lock
        join.kill(), join2.kill(), join.wait(), join2.wait()
    finally:
        worker.kill()
        worker.wait()


def test_a_dead_agents_hosts_wait_for_its_fetchers(tmp_path):
    """Ray reports an agent dead before its node's fetchers have exited: the agent taking its hosts
    over waits until no fetcher of that agent holds ``.workers-AGENT`` (another agent's do not count)."""
    out = tmp_path / "crawl"
    assert agent_workers_gone(out, "agent1", timeout=0)  # never had a fetcher
    fetcher, other = _holder(out, WORKER, "agent1"), _holder(out, WORKER, "agent0")
    try:
        assert not agent_workers_gone(out, "agent1", timeout=0.3)
        t0 = time.time()
        subprocess.Popen([sys.executable, "-c", f"import os, time; time.sleep(1); os.kill({fetcher.pid}, 9)"])
        assert agent_workers_gone(out, "agent1", timeout=30)
        # the lock goes as the process exits, a moment before it can be reaped (hence wait, not poll)
        assert time.time() - t0 >= 0.9 and fetcher.wait(timeout=10) == -9 and other.poll() is None
    finally:
        for p in (fetcher, other):
            p.kill()
            p.wait()


def test_resume_refuses_a_crawl_of_the_older_frontier_layout(tmp_path, redis_url):
    """A crawl started before the frontier keyed visit states by server name (its ``P meta`` has no
    ``layout``) cannot be resumed: its Redis keys and sieve shards are another layout's (issue 29).
    One line says so; a crawl of this layout passes that check."""
    import redis

    from raycrawl.actors.cluster.driver import verify_resume
    from raycrawl.storage.redis_frontier import LAYOUT, RedisFrontier

    out = tmp_path / "crawl"
    (out / "sieve").mkdir(parents=True)
    crawl_id = new_crawl_id(out)
    f = RedisFrontier(redis.Redis.from_url(redis_url), "old:", register=False)
    f.r.hset(f.k.meta, mapping={"started": 1.0, "crawl_id": crawl_id, "settings": "{}"})  # as an older raycrawl wrote it
    with pytest.raises(UserError, match="started by an older raycrawl.*layout 1.*new --out") as info:
        verify_resume(out, f)
    assert "\n" not in str(info.value)
    f.r.hset(f.k.meta, "layout", LAYOUT)
    try:
        verify_resume(out, f)
    except UserError as exc:  # (the consistency check may still object to this bare directory)
        assert "older raycrawl" not in str(exc)
