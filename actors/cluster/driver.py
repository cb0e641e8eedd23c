"""The crawl's driver: what ``raycrawl crawl`` runs. One crawl per directory (the lock, the resume
check), Redis (embedded and supervised unless ``--redis-url``), Ray (local unless ``--address``),
then one agent in this process or several under :mod:`actors.cluster.membership`; Ctrl-C and storage
failures end it with one line."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from raycrawl.actors.cluster.agent import Agent
from raycrawl.actors.cluster.heartbeat import Heartbeat
from raycrawl.atomic import replace_bytes
from raycrawl.errors import UserError
from raycrawl.file_limit import files_needed, raise_file_limit
from raycrawl.progress import Progress
from raycrawl.redis_server import connect
from raycrawl.settings import Settings
from raycrawl.stops import storage_failure
from raycrawl.storage.crawl_check import check_against_redis, check_files, refusal
from raycrawl.storage.crawl_dir import CrawlDirLock, layout, read_crawl_id
from raycrawl.storage.operator_control import Control
from raycrawl.storage.out_store import OutStore
from raycrawl.storage.redis_frontier import LAYOUT, RedisFrontier
from raycrawl.storage.shard_handoff import missing_from_store

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _signals_stop(request_stop: Callable[[], None]):
    """Ctrl-C (SIGINT) and SIGTERM (``timeout``, ``docker stop``, systemd, Kubernetes, ``ray job
    stop``, a VM's shutdown) ask the crawl to stop between batches — fetchers stopped, everything
    fetched stored and committed — instead of cutting a batch in two; a second signal aborts.
    Yields the list the first signal's number is put in (the exit code is 128 + it)."""
    import signal

    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def on_signal(signum, frame) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signum)
        request_stop()
        log.warning("%s: committing what is fetched, then stopping (again to abort)", signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_all(redis_url: str, prefix: str) -> None:
    """Every agent of the crawl stops at its next batch boundary (the control plane's stop)."""
    with connect(redis_url) as client:
        Control(client, prefix).switch("stop", "signal")


def verify_resume(out: Path, f: RedisFrontier, store: OutStore | None = None) -> None:
    """--resume continues only this directory's crawl, held whole by this Redis: its crawl id
    (an emptied Redis — a lost AOF — or another crawl's would silently start over or mix two
    crawls) and the consistency check (storage/crawl_check.py). Run before Ray starts.
    ``store`` (with ``agent_dir``): the sieves and virtual queues are in the agents' directories
    and the store, not in ``out``: the store must hold every shard put away as its put-away left
    it (storage/shard_handoff.py), whatever node is gone."""
    agents_elsewhere = store is not None
    if not (layout(out).sieve).exists() and not agents_elsewhere and not f.has_crawl():
        raise UserError(f"--resume: no crawl to resume in {out} (and its Redis)")
    ours = read_crawl_id(out)
    held = f.meta().get("crawl_id")
    if ours is not None and held != ours:
        where = "holds no crawl" if held is None else f"holds another crawl ({held})"
        raise UserError(f"--resume: the Redis of {out} {where}, not crawl {ours}: its data "
                        f"(AOF in {out / 'redis'} or --redis-url) is lost or not this crawl's; "
                        "restore it, or start over in a new --out")
    layout_held = f.meta().get("layout")
    if held is not None and layout_held != LAYOUT:
        raise UserError(f"--resume: the crawl in {out} was started by an older raycrawl, whose frontier "
                        f"keys hosts by scheme (layout {layout_held or 1}; this version's is {LAYOUT}, one "
                        "visit state per server name): finish it with the raycrawl that started it, or "
                        "start over in a new --out")
    damages, unconfirmed = ([], 0) if agents_elsewhere else check_against_redis(out, f)
    if damages:
        raise UserError(refusal(damages, out))
    if store is not None and (missing := missing_from_store(f, store)):
        raise UserError(f"--resume: the object store {store.url} lacks the latest state of "
                        f"{len(missing)} shards ({'; '.join(missing[:3])}): it was emptied or changed "
                        "since the last run; restore it, or start over in a new --out")
    f.confirm_resume(unconfirmed)


def resume_focus(settings: Settings, f: RedisFrontier) -> None:
    """A resumed crawl keeps the priority levels it started with: without ``--focus`` it runs the
    focus model it was started with; a model with another number of levels would leave URLs in
    front queues nobody reads, so it is refused."""
    from raycrawl.policies.focus import FocusPolicy

    try:
        stored = json.loads(f.meta().get("settings") or "{}").get("focus")
    except ValueError:
        stored = None
    if stored is None:
        if settings.focus is not None and FocusPolicy.load(settings.focus).levels > 1:
            raise UserError("--resume: this crawl was not focused; its sieve has one front queue, "
                            "so it cannot take a focus model with priority levels")
        return
    if settings.focus is None:
        if not Path(stored).is_file():
            raise UserError(f"--resume: this crawl was focused by {stored}, which is gone: pass --focus MODEL "
                            "(a model with the same number of levels)")
        settings.focus = stored
        log.warning("resuming with the focus model the crawl started with: %s", stored)
        return
    if Path(stored).is_file():  # (gone: the levels cannot be compared; the given model is taken)
        old, new = FocusPolicy.load(stored).levels, FocusPolicy.load(settings.focus).levels
        if old != new:
            raise UserError(f"--resume: this crawl's front queues have {old} levels ({stored}); --focus "
                            f"{settings.focus} has {new}")


@contextlib.contextmanager
def _checked(settings: Settings):
    """--resume goes ahead only on crawl files that agree with themselves (storage/crawl_check.py);
    checked before the embedded Redis starts on an AOF that may be damaged."""
    if settings.resume:
        damages = check_files(Path(settings.out), embedded_redis=settings.redis_url is None)
        if damages:
            raise UserError(refusal(damages, Path(settings.out)))
    yield


def _write_crawl_log(out: Path, seeds: set[str] | None = None) -> None:
    """OUT/crawl.log, Heritrix's format, rewritten from the link records at the end of every run."""
    from raycrawl.storage.crawl_log import write_text

    try:
        write_text(out, layout(out).crawl_log, "heritrix", seeds)
    except OSError as exc:  # the crawl's own files are complete; only this derived view is missing
        log.warning("crawl.log not written (%s); `raycrawl log %s > crawl.log` writes it later", exc, out)


def _write_timeline(out: Path) -> None:
    """OUT/crawl-timeline.png from the samples the agents took (storage/crawl_timeline.py)."""
    from raycrawl.storage import crawl_timeline

    try:
        crawl_timeline.write_png(layout(out).timeline, layout(out).timeline_png)
    except OSError as exc:
        log.warning("crawl-timeline.png not written (%s)", exc)


def run_crawl(settings: Settings, progress: Progress | None = None) -> dict[str, Any]:
    """Run a whole crawl: Redis (embedded under ``out/redis`` unless ``redis_url``), Ray (local unless
    ``address``), the agent. Returns the report (also written to ``out/report.json``)."""
    import ray

    from raycrawl.credentials import scrub
    from raycrawl.ray_start import dashboard_url, start_ray, stop_ray
    from raycrawl.redis_server import redis_url_for

    out = Path(settings.out)
    # A store that cannot be reached (or has no such bucket) is a one-line stop before anything starts.
    store = OutStore(settings.out_store) if settings.out_store else None
    if store is not None:
        store.listing()
    # Before Redis and Ray start: a local cluster's processes inherit the limit (core/file_limit.py).
    raise_file_limit(files_needed(settings) * settings.fetch_actors)
    # One crawl per directory, decided before Redis or Ray start (storage/crawl_dir.py).
    password = settings.redis_password()
    with (CrawlDirLock(out), _checked(settings),
          redis_url_for(settings.redis_url, layout(out).redis, supervise=True, password=password) as url):
        # `raycrawl status --out DIR` finds the running crawl's Redis here (its password it is given).
        # (whole or absent: a reader polling for it — `raycrawl status --out` — never sees it half written)
        replace_bytes(layout(out).redis_url, (scrub(url) + "\n").encode())
        if settings.resume:  # before Ray starts: a refusal costs a second, not a cluster
            with connect(url) as client:
                verify_resume(out, RedisFrontier(client, settings.redis_prefix),
                              store if settings.agent_dir is not None else None)
                # (after the checks: a refused resume writes nothing) A stop the operator asked of
                # the last run is not this run's; a fresh crawl's begin() clears everything.
                Control(client, settings.redis_prefix).clear_stop()
                resume_focus(settings, RedisFrontier(client, settings.redis_prefix, register=False))
                if settings.revisit:
                    from raycrawl.actors.cluster.periodic import begin_pass

                    begin_pass(out, RedisFrontier(client, settings.redis_prefix, register=False), settings,
                               store if settings.agent_dir is not None else None)
        if settings.dedup_index:  # read once, before the agents open it (storage/dedup_index.py)
            from raycrawl.storage.dedup_index import FILE, build

            build(settings.dedup_index, out)
            if settings.agent_dir is not None:  # agents without a shared out take it from the store
                store.put(out / FILE, FILE)
        # `raycrawl status` tells from this heartbeat that the crawl runs (its state may outlive it
        # in an external Redis: actors/cluster/heartbeat.py); only now, as a refused --resume writes nothing.
        heartbeat, started_ray = Heartbeat(url, settings.redis_prefix, "driver").start(), False
        try:
            started_ray = start_ray(settings.address, log_to_driver=True, dashboard=settings.dashboard)
            if started_ray and dashboard_url():
                layout(out).dashboard_url.write_text(dashboard_url() + "\n")
                print(f"Ray dashboard: {dashboard_url()}", file=sys.stderr, flush=True)
            if settings.agents > 1 or settings.elastic:
                from raycrawl.actors.cluster.membership import run_agents

                with _signals_stop(lambda: stop_all(url, settings.redis_prefix)) as caught:
                    report = run_agents(settings, url)
            else:
                agent = Agent(settings, url, progress)
                with _signals_stop(agent.stop_requested.set) as caught:
                    report = agent.run()
            if caught:
                report = {**report, "stopped": "interrupted", "stop_signal": caught[0]}
            seeds = None
            if settings.agent_dir is not None:  # OUT gets a copy of what the agents shipped, but WARC files
                from raycrawl.seeds import read_seeds

                mine = (layout(out).report, layout(out).crawl_log, layout(out).timeline_png, layout(out).crawl_id)
                store.sync_down(out, skip=("warc", *(p.name for p in mine)))
                seeds = set(read_seeds(settings.seeds)) if settings.seeds else set()
            if settings.crawl_log:
                _write_crawl_log(out, seeds)
            _write_timeline(out)
            if store is not None:  # what the store actors shipped, and the rest (storage/out_store.py)
                files, size = store.sync_up(out)
                log.info("%s: %d files (%d bytes) uploaded at the end of the run", store.url, files, size)
            return report
        except (redis.RedisError, OSError, ray.exceptions.RayTaskError) as exc:
            stop = storage_failure(exc)
            if stop is None:
                raise
            raise stop from None
        finally:
            heartbeat.stop()
            if started_ray:
                stop_ray()
            (layout(out).redis_url).unlink(missing_ok=True)
            (layout(out).dashboard_url).unlink(missing_ok=True)
