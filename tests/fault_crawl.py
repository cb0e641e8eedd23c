"""Helpers of the fault tests (tests/test_faults.py, tests/test_redis_faults.py): a websim crawl
started in its own process group, Redis's in-flight set frozen at a fault, and the end-of-crawl
check against websim's request log and manifest (never the crawler's own counters)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import redis

from raycrawl.storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
# websim's "slow" hosts answer after 1.5 s by default; one request at a time per IP, a slow host holds
# every host of its IP as long, and its few pages set a crawl's length (a 40-host crawl: 13 s at
# 1.5 s, 9 s at 0.3). The test webs' slow hosts take 0.3 s: still 3x the host delay, 15x the IP
# delay of these crawls, which is what the politeness audits around them are about.
SLOW_DELAY = 0.3
WEB = {"hosts": 40, "ips": 6, "seed": 5, "pages_per_host_mean": 8, "slow_delay": SLOW_DELAY}
HOST_DELAY, IP_DELAY = 0.1, 0.02


def crawl_cmd(web, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
            "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
            "--host-delay", str(HOST_DELAY), "--ip-delay", str(IP_DELAY), "--max-urls-per-host", "60",
            # hang hosts answer nothing: a short timeout, as hangs are not what these tests are about
            "--read-timeout", "3", "--max-retries", "1", "--retry-backoff", "0.5", *extra]


def env(own_ray: bool = False, **extra: str) -> dict[str, str]:
    """A fault crawl's environment; ``own_ray``: it starts a Ray of its own (no ``$RAY_ADDRESS``:
    tests/conftest.py), for faults that kill the crawl's whole process group, Ray included."""
    base = {k: v for k, v in os.environ.items() if not (own_ray and k == "RAY_ADDRESS")}
    return {**base, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), **extra}


def start_until(web, cmd: list[str], pages: int, own_ray: bool = False, **extra_env: str) -> subprocess.Popen:
    """Start a crawl (own process group) and return once websim has answered ``pages`` requests."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(own_ray, **extra_env), cwd=ROOT,
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
    politeness, robots or unlinked violation (websim's log; Crawl-delay hosts among those
    crawled), a finished crawl."""
    manifest = web.manifest
    slow = {h for h in manifest.hosts if manifest.crawl_delay(h) > 0}
    asked = Counter(r.host.rsplit(":", 1)[0].lower() for r in web.requests())
    assert sum(1 for h in slow if asked[h] >= 3) >= 2, "the websim must exercise Crawl-delay hosts"
    twice = fetched_twice(audit)
    assert twice <= in_flight, sorted(twice - in_flight)[:10]
    others = [v for v in audit.violations if v.kind != "duplicate"]
    assert not others, audit.summary()
    assert json.loads((out / "report.json").read_text())["stopped"] == "frontier empty"
    urls = {r.url for r in iter_link_records(out)}
    missing = {u for u in manifest.reachable() if manifest.allowed(u)} - urls
    assert len(missing) <= 0.05 * len(urls), sorted(missing)[:10]  # the per-host cap, as in test_crawl


def canonical_in_flight(in_flight: set[str]) -> set[str]:
    """In-flight URLs (``inflight_url`` of the keys) as the audit names URLs: the pages' (robots.txt
    markers name no URL of their own)."""
    from raycrawl.actors.frontier.workbench import inflight_url, is_robots

    return {inflight_url(k) for k in in_flight if not is_robots(k.partition(" ")[2])}
