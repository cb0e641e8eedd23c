"""actors: the parts of a crawling agent (BUbiNG's names), each a Ray actor or driven by one."""

import functools
import logging
import os

from raycrawl import heap_watch, malloc_trim
from raycrawl.credentials import scrub_logs

LOG_LEVEL_ENV = "RAYCRAWL_LOG_LEVEL"
"""The log level of the actors' processes (``raycrawl -v`` sets it for the Ray it starts; on a
cluster joined with ``--address``, set it in the workers' environment or the job's runtime_env)."""


def actor_logging() -> None:
    """Log at the level the CLI was given (WARNING by default) in an actor's process."""
    level = os.environ.get(LOG_LEVEL_ENV, "WARNING").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        level = "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)  # (Ray may have configured the root logger already)
    scrub_logs()  # no credential in a log line (core/credentials.py)


def actor_repr(actor: object) -> str:
    """How the Ray dashboard and the worker logs name an actor: its class and its actor name,
    which says whose it is (``CrewWorker(raycrawl-worker-rc:agent1)``)."""
    import ray

    try:
        name = ray.get_runtime_context().get_actor_name() or ""
    except Exception:  # noqa: BLE001 - outside an actor, a repr must still work
        name = ""
    return f"{type(actor).__name__}({name})"


def per_batch(method=None, *, group: str | None = None):  # noqa: ANN001, ANN201 - a decorator of actor methods
    """Mark an actor method the crawl calls per batch (or per second): Ray records no task events
    for it. With events on, Ray's GCS grew ~0.1 KB a call however low its event cap
    (``RAY_task_events_max_num_task_in_gcs``; measured: one actor, 150,000 calls, GCS private memory
    26 → 82 MB with events, flat at 27–28 MB without): about ten such calls a batch made the GCS the
    one process of a crawl that grew with pages. Lifecycle calls (start, take, give, close…) keep
    their events, so the dashboard's task table still shows what each actor went through.
    ``@per_batch(group=…)``: in that concurrency group of the actor."""
    import ray

    options = {"enable_task_events": False, **({"concurrency_group": group} if group else {})}
    return ray.method(**options)(method) if method is not None else ray.method(**options)


def named(cls: type) -> type:
    """An actor class as the Ray dashboard should show it (apply under ``@ray.remote``): its own
    name, not ``actor_class.<locals>.X`` (the factories define it inside a function), and
    :func:`actor_repr`; its process logs at the CLI's level (:func:`actor_logging`)."""
    cls.__qualname__ = cls.__name__
    cls.__repr__ = actor_repr
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - the actor's own signature
        actor_logging()
        heap_watch.start(cls.__name__)
        malloc_trim.start()
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls
