"""Damaged crawl state (issue 20): `raycrawl check` and --resume refuse it with one line naming
the file and the choices; the repairs the crawl's own files make exact are carried out. On a
two-agent websim crawl killed with SIGKILL while it spilled to the virtualizer."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
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
    start_until,
)

from raycrawl.actors.frontier.workbench import inflight_url

# The longest the embedded Redis's AOF may lag what it acknowledged (appendfsync everysec; Valkey
# postpones a write while the previous fsync runs, up to 2 s).
AOF_WINDOW = 2.0


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
    from raycrawl.websim import Websim

    base = tmp_path_factory.mktemp("killed")
    out = base / "crawl"
    config = base / "crawl.toml"  # three URLs per host in Redis: the rest spill to the virtualizer
    config.write_text("[crawl]\nworkbench_urls_per_host = 3\n")
    with Websim(**WEB, out_dir=base / "web") as web:
        proc = start_until(web, crawl_cmd(web, out, "--agents", "2", "--config", str(config)), pages=150,
                           own_ray=True)
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone first: its Redis and fetchers must stop with it
        killed = time.time()
        proc.wait()
        pid = int((out / "redis" / "redis.pid").read_text())
        while Path(f"/proc/{pid}").exists() and time.time() < killed + 10:  # PDEATHSIG: gone with the driver
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists()
        time.sleep(3)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the rest of the group (Ray), as a crash would
        from raycrawl.redis_server import EmbeddedRedis

        with EmbeddedRedis(out / "redis") as server:
            client = redis.Redis.from_url(server.url)
            in_flight = {inflight_url(k.decode()) for k in client.hkeys("rc:inflight")}
            client.close()
        # after the driver died, a request could only be one the fetchers had already acquired
        # (a robots.txt request is in flight as its host's "!robots" marker; a cross-authority hop
        # under the asking host's marker, which names no URL of its own: left out). The AOF may
        # lack an acquire Redis acknowledged in its last seconds (appendfsync everysec: a write
        # waits while an fsync runs, up to 2 s; what crash recovery allows for): a fetcher holding
        # such a URL fetches it soon after the kill, and only then.
        markers = {k.split("!robots")[0] for k in in_flight if "!robots" in k}
        late = [r for r in web.requests() if r.start > killed and not r.target.startswith("/robots-for/")]
        unaccounted = [(f"http://{r.host}{r.target}", round(r.start - killed, 3)) for r in late
                       if (f"http://{r.host}" not in markers if r.target == "/robots.txt"
                           else f"http://{r.host}{r.target}" not in in_flight)]
        assert all(after < AOF_WINDOW for _, after in unaccounted), unaccounted[:10]
        assert any(q.stat().st_size for q in (out / "virtualizer").glob("*.q"))  # it spilled
        yield out, web


def _copy(out: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(out, to, symlinks=True)
    return to


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raycrawl", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(), cwd=ROOT)  # (a resume joins the session's Ray)


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
    # (the lock file names whoever holds the directory: the refusing process took it, by design)
    before = {p: p.stat().st_size for p in copy.rglob("*")
              if p.is_file() and p.name not in ("redis.log", "redis.pid", ".lock")}
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
