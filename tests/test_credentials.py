"""Credentials (core/credentials.py): a password-protected frontier, given by file or URL, used by
a real crawl from start to end, with the password in no file the crawl writes, no log line and no
``ps`` line of any process it starts; the daemon refuses to listen beyond loopback without one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from leaks import files_holding

from raycrawl.credentials import MASK, read_secret, redact, remember, scrub, with_password
from raycrawl.errors import UserError
from raycrawl.redis_server import free_port
from raycrawl.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "Pw-7f3e9c1b.q"  # (the search below also looks for its URL-quoted form)


def test_urls_and_settings_are_redacted(tmp_path) -> None:
    url = with_password("redis://alice@10.0.0.1:6379/0", "p@ss:w/rd")
    assert url == "redis://alice:p%40ss%3Aw%2Frd@10.0.0.1:6379/0"
    assert scrub(url) == f"redis://alice:{MASK}@10.0.0.1:6379/0"
    assert scrub(f"cannot reach rediss://:{PASSWORD}@h:1/0 (x)") == f"cannot reach rediss://:{MASK}@h:1/0 (x)"
    s = Settings(redis_url=f"redis://:{PASSWORD}@127.0.0.1:1/0")
    assert PASSWORD not in repr(s.to_dict()) and s.to_dict()["redis_url"] == f"redis://:{MASK}@127.0.0.1:1/0"
    remember("a-secret-value")
    assert redact("user_agent", "bot a-secret-value") == f"bot {MASK}"
    for content, why in (("", "empty"), (None, "cannot read")):
        path = tmp_path / f"pw-{why}"
        if content is not None:
            path.write_text(content)
        with pytest.raises(UserError, match=why):
            read_secret(path, "--redis-password-file")
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    assert read_secret(tmp_path / "pw", "x") == PASSWORD


def _send(port: int, command: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(command)
        return s.recv(200)


def _leaks(root: Path, texts: list[str]) -> list[str]:
    needles = [PASSWORD.encode(), PASSWORD.replace(".", "%2E").encode()]
    found = files_holding(root, *needles)
    return found + [f"log: {line}" for t in texts for line in t.splitlines() if PASSWORD in line]


class _PsWatch:
    """Every command line on the machine, sampled while a crawl runs, that shows the password
    (other than the crawl command itself, whose URL the user typed)."""

    def __init__(self, own: str) -> None:
        self.own, self.seen, self.samples = own, set(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            lines = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
            self.samples += 1
            self.seen.update(x for x in lines if PASSWORD in x and self.own not in x)

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join()
        return self.seen


def _crawl(web, out: Path, *extra: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    cmd = [sys.executable, "-m", "raycrawl", "-v", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
           "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
           "--host-delay", "0.05", "--ip-delay", "0.0", *extra]
    watch = _PsWatch(own=f"--out {out}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})})
    finally:
        seen = watch.stop()
    assert watch.samples > 3
    return r, seen


@pytest.mark.own_ray
def test_password_protected_frontier_crawls_and_writes_no_secret(tmp_path) -> None:
    from raycrawl.websim import Websim

    secret = tmp_path / "redis.pass"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    # The daemon, started as ray_cluster.yaml starts it: beyond loopback only with a password.
    r = subprocess.run([sys.executable, "-m", "raycrawl.redis_daemon", "--dir", str(tmp_path / "d0"), "--port",
                        str(free_port()), "--bind", "0.0.0.0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--requirepass-file" in r.stderr and "Traceback" not in r.stderr, r.stderr
    port = free_port()
    daemon = subprocess.Popen([sys.executable, "-m", "raycrawl.redis_daemon", "--dir", str(tmp_path / "redis"),
                               "--port", str(port), "--requirepass-file", str(secret)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        printed = daemon.stdout.readline().strip()
        assert printed == f"redis://:{MASK}@127.0.0.1:{port}/0", printed
        assert _send(port, b"PING\r\n").startswith(b"-NOAUTH")
        assert not [x for x in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
                    if PASSWORD in x]
        with Websim(hosts=6, ips=2, seed=3, clean=True, pages_per_host_mean=6, out_dir=tmp_path / "web") as web:
            pages = web.manifest.reachable()
            # 1. the shared daemon, the password in the URL
            out1 = tmp_path / "c1"
            r1, seen1 = _crawl(web, out1, "--redis-url", f"redis://:{PASSWORD}@127.0.0.1:{port}/0")
            assert r1.returncode == 0, r1.stderr[-3000:]
            # 2. the embedded server, which then wants the password too, given by file
            out2 = tmp_path / "c2"
            holder: dict = {}

            def knock() -> None:  # while crawl 2 runs: its own server refuses a client without it
                deadline = time.time() + 120
                while time.time() < deadline and "reply" not in holder:
                    try:
                        live = (out2 / "redis-url").read_text().strip()
                        holder["url"] = live
                        holder["reply"] = _send(int(live.rsplit(":", 1)[1].split("/")[0]), b"PING\r\n")
                    except (OSError, ValueError, IndexError):
                        time.sleep(0.2)

            knocker = threading.Thread(target=knock, daemon=True)
            knocker.start()
            r2, seen2 = _crawl(web, out2, "--redis-password-file", str(secret))
            knocker.join()
            assert r2.returncode == 0, r2.stderr[-3000:]
            assert holder.get("reply", b"").startswith(b"-NOAUTH"), holder
            assert f":{MASK}@127.0.0.1:" in holder["url"]
            # status of the stopped crawl on the daemon: with the file, and a clear line without it
            status = [sys.executable, "-m", "raycrawl", "status", "--redis-url", f"redis://127.0.0.1:{port}/0"]
            ok = subprocess.run([*status, "--redis-password-file", str(secret), "--json"], capture_output=True,
                                text=True, cwd=ROOT, timeout=60)
            refused = subprocess.run(status, capture_output=True, text=True, cwd=ROOT, timeout=60)
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert ok.returncode == 0 and '"pages"' in ok.stdout, ok.stderr
    assert json.loads(ok.stdout)["running"] is False  # its state outlives it in the daemon: no heartbeat
    assert refused.returncode == 2 and "Traceback" not in refused.stderr and len(refused.stderr.splitlines()) == 1
    for out in (out1, out2):  # the crawls really crawled: every page websim's model says is reachable
        fetched = {line.split()[3] for line in (out / "crawl.log").read_text().splitlines()}
        assert pages <= fetched, sorted(pages - fetched)[:5]
    assert not seen1 and not seen2, (seen1, seen2)
    texts = [r1.stdout, r1.stderr, r2.stdout, r2.stderr, ok.stdout, ok.stderr, refused.stderr]
    assert any("INFO" in t for t in texts)  # (-v: the log lines that name the Redis were written)
    assert pages and not _leaks(out1, texts) and not _leaks(out2, []), _leaks(out1, texts) + _leaks(out2, [])
