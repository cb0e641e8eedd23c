"""The crawl directory: its layout, its owner and identity (one crawl per ``OUT``, and a Redis that
is that crawl's).

* **Layout**: :func:`layout` names every part of ``OUT`` (docs/crawling.md, "Output directory");
  no other module spells those names.

* **Lock**: ``OUT/.lock`` is held with an exclusive ``flock`` for the whole run by the process
  that drives the crawl, taken before Redis or Ray start. The kernel releases it when that process
  dies, however it dies, so a stale lock never blocks a ``--resume``; a second crawl on the same
  directory (fresh or ``--resume``) is refused at once, before it starts anything. The file holds
  the owner's pid and start time, for the message.
* **Workers**: the Ray actors of a run that write under ``OUT`` or send requests hold a *shared*
  ``flock`` on ``OUT/.workers`` for their life (:func:`join_run`). Killing a crawl's process group
  does not kill them at once (Ray puts each worker in a process group of its own; they exit a few
  seconds later, when they notice their raylet is gone), and until then a store actor may still be
  writing a WARC record and a fetch actor still be talking to a host. So whoever takes the lock then
  waits for that file's exclusive lock (:func:`wait_for_workers`) before touching anything: a
  ``--resume`` or ``raycrawl check`` never works beside the previous run's last writes.
* **Crawl id**: a fresh crawl writes a random id to ``OUT/crawl-id`` and to its Redis (``P meta``
  field ``crawl_id``); ``--resume`` refuses a Redis that does not hold the directory's id (an
  emptied or foreign Redis would silently start the crawl over, or mix two crawls).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from raycrawl.errors import UserError
from raycrawl.settings import Settings

if TYPE_CHECKING:  # (redis-py's import is ~0.1 CPU-s; every command reads crawl directories)
    from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
WORKERS_NAME = ".workers"
WORKERS_WAIT = 60.0  # seconds; a killed run's Ray workers exit within a few
ID_NAME = "crawl-id"
# The parts of a crawl directory: attribute of Layout -> name under OUT.
PARTS = {"warc": "warc", "links": "links", "rendered": "rendered", "sieve": "sieve", "virtualizer": "virtualizer", "redis": "redis",
         "redis_url": "redis-url", "dashboard_url": "dashboard-url", "report": "report.json", "crawl_id": ID_NAME, "lock": LOCK_NAME,
         "workers": WORKERS_NAME,
         "graph": "graph", "summaries": "summaries", "spam": "spam", "dedup": "dedup", "index": "index",
         "revisit": "revisit", "indexes": "indexes", "crawl_log": "crawl.log", "timeline": "timeline",
         "timeline_png": "crawl-timeline.png", "operator_log": "operator.log", "wet": "wet", "wat": "wat"}


class Layout:
    """The paths of one crawl directory's parts (``layout(out).warc`` is ``out/warc``)."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        for attr, name in PARTS.items():
            setattr(self, attr, self.out / name)

    warc: Path
    links: Path
    rendered: Path
    sieve: Path
    virtualizer: Path
    redis: Path
    redis_url: Path
    dashboard_url: Path
    timeline: Path
    timeline_png: Path
    report: Path
    crawl_id: Path
    lock: Path
    workers: Path
    graph: Path
    summaries: Path
    spam: Path
    dedup: Path
    index: Path
    revisit: Path
    indexes: Path
    crawl_log: Path
    operator_log: Path
    wet: Path
    wat: Path


def layout(out: str | Path) -> Layout:
    return Layout(out)


def index_dir(d: str | Path) -> Path:
    """The fragment index of crawl directory ``d`` (``d/index``), or ``d`` itself when it is not a
    crawl directory with one (an index directory given directly)."""
    index = layout(d).index
    return index if index.is_dir() else Path(d)


def virtual_queue(directory: str | Path, host: str) -> Path:
    """The on-disk virtual queue of ``host`` in the virtualizer's directory (actors/frontier/virtualizer.py)."""
    import xxhash

    return Path(directory) / f"{xxhash.xxh3_64_hexdigest(host.encode())}.q"


class CrawlDirLock:
    """``with CrawlDirLock(out):`` — own ``out`` for the block (see the module doc)."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self._fd: int | None = None

    def acquire(self) -> CrawlDirLock:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"cannot use {self.out} as the crawl directory: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise UserError(f"{self.out} is in use by a running crawl ({holder}): wait for it to end, "
                            "or stop it (Ctrl-C) before --resume; or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        self._fd = fd
        try:
            wait_for_workers(self.out)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> CrawlDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def join_run(out: str | Path, agent: str | None = None) -> tuple[int, ...]:
    """Hold a shared lock on ``OUT/.workers`` (and, for an ``agent``'s fetcher, on
    ``OUT/.workers-AGENT``) for the calling process's life (see the module doc); returns the
    descriptors, which the caller keeps open."""
    Path(out).mkdir(parents=True, exist_ok=True)
    fds = []
    for name in (WORKERS_NAME, *([f"{WORKERS_NAME}-{agent}"] if agent else [])):
        fd = os.open(Path(out) / name, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        fds.append(fd)
    return tuple(fds)


def agent_workers_gone(out: str | Path, agent: str, timeout: float = WORKERS_WAIT) -> bool:
    """Wait until no fetcher of the dead ``agent`` holds ``OUT/.workers-AGENT``: Ray reports an
    agent dead when its node is gone, but the node's worker processes notice only a little later
    and may still be talking to hosts until then, so its hosts wait before another agent fetches
    from them. False if one still holds it after ``timeout`` s (a filesystem whose locks a dead node
    keeps: the caller goes on)."""
    path = Path(out) / f"{WORKERS_NAME}-{agent}"
    if not path.exists():
        return True
    fd = os.open(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
    finally:
        os.close(fd)


def wait_for_workers(out: str | Path, timeout: float = WORKERS_WAIT) -> None:
    """Wait until no process of an earlier run holds ``OUT/.workers`` (see the module doc)."""
    fd = os.open(Path(out) / WORKERS_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, told = time.monotonic() + timeout, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return  # closing the descriptor below lets this run's workers in
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise UserError(
                        f"processes of an earlier run still work in {out} (the Ray workers of a killed "
                        f"crawl; `fuser -v {Path(out) / WORKERS_NAME}` lists them): wait for them to exit, "
                        "or kill them, then try again") from None
                if not told:
                    log.warning("waiting for the workers of the previous run in %s to exit", out)
                    told = True
                time.sleep(0.1)
    finally:
        os.close(fd)


def agent_out(settings: Settings, crawl_id: str, agent: str) -> Settings:
    """The settings an agent of a crawl without a shared ``out`` runs with: ``out`` is its own
    directory ``agent_dir/<crawl id>/<agent>`` on its node (storage/shard_handoff.py); unchanged
    without ``agent_dir``."""
    import dataclasses

    if settings.agent_dir is None:
        return settings
    return dataclasses.replace(settings, out=str(Path(settings.agent_dir).resolve() / crawl_id / agent))


def read_crawl_id(out: str | Path) -> str | None:
    """The id written by the crawl that made ``out`` (None for a directory without one)."""
    path = Path(out) / ID_NAME
    try:
        return path.read_text().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def new_crawl_id(out: str | Path) -> str:
    """Make, store (atomically) and return the id of a fresh crawl in ``out``."""
    crawl_id = uuid.uuid4().hex
    tmp = Path(out) / (ID_NAME + ".tmp")
    tmp.write_text(crawl_id + "\n")
    tmp.replace(Path(out) / ID_NAME)
    return crawl_id


def begin(out: Path, frontier: RedisFrontier, settings: Settings) -> None:
    """Start the crawl in ``out`` and its Redis: a new one (refused where a crawl is held: --resume
    or another --out), or a resumed one (the driver verified it first): its in-flight URLs go back
    to their visit states, every host and IP waiting a full delay; its unrecorded failures go to
    whichever agent claims them."""
    if settings.resume:
        frontier.clear_idle()
        frontier.clear_fences()
        requeued = frontier.recover(time.time(), settings.host_delay, settings.ip_delay)
        orphans = frontier.orphan_failing(every_view=True)
        log.warning("resuming: %d in-flight URLs put back in their visit states, %d failures to record", requeued, orphans)
        return
    if (layout(out).sieve).exists() or frontier.has_crawl():
        raise UserError(f"{out} already holds a crawl: pass --resume to continue it, or choose another --out")
    frontier.clear()
    frontier.start_crawl(new_crawl_id(out), json.dumps(settings.to_dict()), time.time())
