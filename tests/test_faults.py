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
from collections import Counter
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
    urls = {r["url"] for r in iter_link_records(out)}
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


# --- damaged state: `raycrawl check` and --resume refuse it with one line; repairs that are exact ---
def _largest_shard(out: Path) -> Path:
    return max((out / "sieve").glob("[0-9][0-9]"), key=lambda d: (d / "queue").stat().st_size)


def _gen(shard: Path) -> int:
    return json.loads((shard / "meta.json").read_text())["gen"]


def _cut(path: Path, keep: float = 0.5) -> None:
    os.truncate(path, int(path.stat().st_size * keep))


def _last(out: Path, sub: str, pattern: str) -> Path:
    return sorted((out / sub).glob(pattern))[-1]


DAMAGES = {
    # name: (damage it, path fragment the refusal names, repair offered)
    "aof-manifest": (lambda o: next((o / "redis/appendonlydir").glob("*.manifest")).unlink(), "appendonlydir", False),
    "aof-cut": (lambda o: _cut(next((o / "redis/appendonlydir").glob("*.incr.aof")), 0.4), "redis", True),
    "sieve-meta": (lambda o: (_largest_shard(o) / "meta.json").unlink(), "meta.json", True),
    "fps-cut": (lambda o: _cut(_largest_shard(o) / f"fps.{_gen(_largest_shard(o))}", 0.5), "fps.", True),
    "pending-line": (lambda o: (_largest_shard(o) / f"pending.{_gen(_largest_shard(o))}").open("ab").write(
        b"http://\xff\xfe.test/\n"), "pending.", True),
    "queue-cut": (lambda o: _cut(_largest_shard(o) / "queue", 0.5), "queue", False),
    "warc-cut": (lambda o: _cut(_last(o, "warc", "*.warc.gz"), 0.5), ".warc.gz", False),
    "links-cut": (lambda o: _cut(_last(o, "links", "*.rec.gz"), 0.3), "links", False),
    "virtual-queue-cut": (lambda o: _cut(max((o / "virtualizer").glob("*.q"), key=lambda q: q.stat().st_size), 0.5),
                          ".q", False),
}


@pytest.fixture(scope="module")
def killed_crawl(tmp_path_factory):
    """A websim crawl of two agents killed with SIGKILL (the whole process group) mid-way; websim
    keeps serving."""
    from websim import Websim

    base = tmp_path_factory.mktemp("killed")
    out = base / "crawl"
    config = base / "crawl.toml"  # three URLs per host in Redis: the rest spill to the virtualizer
    config.write_text("[crawl]\nworkbench_urls_per_host = 3\n")
    with Websim(**WEB, out_dir=base / "web") as web:
        proc = start_until(web, crawl_cmd(web, out, "--agents", "2", "--config", str(config)), pages=150)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 10
        pid = int((out / "redis" / "redis.pid").read_text())
        while Path(f"/proc/{pid}").exists() and time.time() < deadline:  # PDEATHSIG: gone with the driver
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists()
        assert any(q.stat().st_size for q in (out / "virtualizer").glob("*.q"))  # it spilled
        yield out, web


def _copy(out: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(out, to, symlinks=True)
    return to


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raycrawl", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(), cwd=ROOT)


def test_intact_killed_crawl_checks_consistent(killed_crawl, tmp_path: Path) -> None:
    out, _ = killed_crawl
    copy = _copy(out, tmp_path / "crawl")
    proc = _cli("check", str(copy), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["damages"] == [] and facts["pages"] > 50


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_damaged_state_is_refused_with_one_line(killed_crawl, tmp_path: Path, name: str) -> None:
    """Each damage a fault campaign met: `raycrawl check` names the file (exit 1); --resume refuses
    with one line and exit 2 before starting anything, and changes nothing on disk."""
    out, web = killed_crawl
    copy = _copy(out, tmp_path / "crawl")
    damage, names, repairable = DAMAGES[name]
    damage(copy)
    proc = _cli("check", str(copy), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = json.loads(proc.stdout)["damages"]
    assert found and names in found[0]["path"], found
    assert bool(found[0]["repair"]) == repairable, found
    before = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name not in ("redis.log", "redis.pid")}
    proc = _cli(*crawl_cmd(web, copy, "--resume")[3:])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("raycrawl crawl: error: --resume refused: ") and names in lines[-1], lines
    assert ("--repair" in lines[-1]) == repairable and "start over" in lines[-1]
    after = {p: p.stat().st_size for p in before}
    assert after == before  # nothing written over the damaged state (an AOF least of all)
    if repairable:  # the repair offered is carried out and that damage is gone
        proc = _cli("check", str(copy), "--repair", "--json")
        result = json.loads(proc.stdout)
        damaged = found[0]["path"]  # (a shard's repair names the shard)
        assert any(line.startswith((damaged + ":", os.path.dirname(damaged) + ":")) for line in result["repaired"]), result
        assert all(d["path"] != found[0]["path"] for d in result["damages"]), result


@pytest.mark.slow
def test_repaired_sieve_shard_resumes_with_nothing_lost(killed_crawl, tmp_path: Path) -> None:
    """Two agents killed with SIGKILL while hosts had URLs spilled to the virtualizer, then every
    sieve shard's commit point deleted: `raycrawl
    check --repair` rebuilds them from the shards' queues; --resume (two agents) then finishes the
    crawl with no URL lost (websim's manifest) and only URLs Redis held in flight fetched again,
    politeness and Crawl-delays kept across the stop (websim's log)."""
    from raycrawl.redis_server import EmbeddedRedis

    out, web = killed_crawl
    copy = _copy(out, tmp_path / "crawl")
    with EmbeddedRedis(copy / "redis") as server:
        client = redis.Redis.from_url(server.url)
        in_flight = {k.decode() for k in client.hkeys("rc:inflight")}
        client.close()
    for shard in (copy / "sieve").glob("[0-9][0-9]"):
        (shard / "meta.json").unlink(missing_ok=True)  # (a shard that never flushed has none)
        for fps in shard.glob("fps.*"):
            fps.unlink()
    proc = _cli("check", str(copy), "--repair")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "repaired:" in proc.stdout and "consistent" in proc.stdout
    proc = _cli(*crawl_cmd(web, copy, "--resume", "--agents", "2", "--config", str(out.parent / "crawl.toml"))[3:],
                timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_crawl(copy, web, web.audit(HOST_DELAY, IP_DELAY), canonical_in_flight(in_flight))
