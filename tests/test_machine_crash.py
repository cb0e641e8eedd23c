"""A machine crash loses nothing Redis acknowledged (issue 49): the crawl's whole directory — its
WARC and link records, sieve shards, virtual queues, summaries, and the embedded Redis's AOF — on a
filesystem that drops every write not fsynced when it crashes (tests/crash_fs.py). Every process of
the crawl is killed with SIGKILL, the unsynced writes go, and ``--resume`` on what the disk kept
must finish the crawl: every page websim served in a WARC record byte for byte (warcio's reading,
websim's log), no URL of the manifest lost, refetches only among what Redis held in flight, no
politeness violation."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from archive_check import check_archive
from crash_fs import CrashFS
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


def fuse_missing() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "mounting a FUSE filesystem here needs root"
    try:
        import mfusepy  # noqa: F401 - it loads libfuse3 when imported
    except (ImportError, OSError) as exc:
        return f"mfusepy/libfuse3: {exc}"
    return None


def session(sid: int) -> set[int]:
    """Every live process of session ``sid``."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(proc.name)) == sid and "Z" not in (proc / "stat").read_text().split(") ")[1][:1]:
                    pids.add(int(proc.name))
    return pids


def holders(mnt: Path) -> set[int]:
    """Every process with a file, directory or mapping under ``mnt``."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            links = [os.readlink(p) for p in (proc / "fd").iterdir()] + [os.readlink(proc / "cwd")]
            maps = (proc / "maps").read_text()
        except OSError:
            continue
        if any(link.startswith(str(mnt)) for link in links) or str(mnt) in maps:
            pids.add(int(proc.name))
    return pids


@pytest.mark.slow
@pytest.mark.skipif(fuse_missing() is not None, reason=str(fuse_missing()))
def test_machine_crash_loses_nothing_redis_acknowledged(tmp_path: Path) -> None:
    from raycrawl.redis_server import EmbeddedRedis
    from raycrawl.websim import Websim

    config = tmp_path / "crawl.toml"  # three URLs per host in Redis: the rest spill to the virtualizer
    config.write_text("[crawl]\nworkbench_urls_per_host = 3\n")
    with CrashFS(tmp_path) as fs, Websim(**WEB, out_dir=tmp_path / "web") as web:
        out = fs.mnt / "crawl"
        cmd = crawl_cmd(web, out, "--agents", "2", "--config", str(config))
        proc = start_until(web, cmd, pages=150, own_ray=True)
        # The power goes: every process of the crawl's session at once (Ray's workers have process
        # groups of their own), and any other with a file under the mount; then what no fsync reached.
        assert holders(fs.mnt), "no process of the crawl has a file open: the test proves nothing"
        for pid in session(proc.pid) | holders(fs.mnt):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 10
        while (holders(fs.mnt) or session(proc.pid)) and time.time() < deadline:
            time.sleep(0.05)
        assert not holders(fs.mnt)
        lost = fs.unsynced_bytes()
        import shutil
        shutil.copytree(fs.base / "cache", tmp_path / "cache_at_crash", symlinks=True)
        shutil.copytree(fs.base / "disk", tmp_path / "disk_at_crash", symlinks=True)
        import subprocess as sp
        print(sp.run("ps -eo pid,pgid,sid,cmd | grep -i ray | grep -v grep | head -30", shell=True, capture_output=True, text=True).stdout)
        fs.crash()
        assert lost > 0, "nothing was unsynced at the crash: the test proves nothing"
        with EmbeddedRedis(out / "redis") as server:
            client = redis.Redis.from_url(server.url)
            in_flight = {k.decode() for k in client.hkeys("rc:inflight")}
            committed = int(client.hget("rc:stats", "pages") or 0)
            client.close()
        assert committed > 0, "Redis acknowledged nothing before the crash: the test proves nothing"
        resumed = subprocess.run([sys.executable, "-m", "raycrawl", *cmd[3:], "--resume"], capture_output=True,
                                 text=True, timeout=400, env=env(own_ray=True), cwd=ROOT)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        # (the embedded Redis fsyncs each write before answering it: an acquire is on disk before
        # its fetch begins, so what is fetched again was in flight at the crash, and only that)
        check_crawl(out, web, web.audit(HOST_DELAY, IP_DELAY), canonical_in_flight(in_flight))
        assert check_archive(out / "warc", web, WEB)["pages_checked"] > 0
