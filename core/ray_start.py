"""Starting Ray, the one way every part does it.

``address=None`` joins the cluster ``$RAY_ADDRESS`` names when it is set (Ray's own convention, and
what ``ray job submit`` sets for its entrypoint), else starts a new local Ray
(``address="local"``: never joining by chance a cluster that already runs on the machine); an
address joins that cluster. Start-up is retried, since on a loaded machine a local node can miss
Ray's fixed 30 s startup wait.
"""

from __future__ import annotations

import logging
import os

from raycrawl.errors import UserError

log = logging.getLogger(__name__)
_dashboard: str | None = None


def dashboard_url() -> str | None:
    """The URL of the dashboard the last :func:`start_ray` started, if it was asked to."""
    return _dashboard


TASK_EVENTS_IN_GCS = 10_000


# What the crawl's actors read from their environment: forwarded to a joined cluster's workers.
# Never a secret here (a job's runtime_env shows in the dashboard and the GCS).
FORWARDED_ENV = ("RAYCRAWL_REDIS_WAIT", "RAYCRAWL_STORE_WAIT", "RAYCRAWL_LOG_LEVEL", "RAYCRAWL_MALLOC_TRIM", "RAYCRAWL_HEAP_DIR",
                 "RAYCRAWL_HEAP_EVERY")


GCS_GONE = 5  # seconds a local crawl waits for its own GCS to answer again


def start_ray(address: str | None = None, num_cpus: int = 2, log_to_driver: bool = False,
              attempts: int = 3, dashboard: bool = False) -> bool:
    """Start (or join) Ray unless this process already did; True if this call started it (the
    caller then shuts it down). ``dashboard``: a local Ray starts its dashboard on loopback
    (:func:`dashboard_url` says where); a joined cluster has its own."""
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # Ray 2.60 local clusters default to token auth
    if not address:
        # The GCS keeps the events of the last N tasks (default 100,000, ~1.7 KB each): a crawl makes
        # about ten actor calls a batch, so its GCS grew linearly to ~190 MB over 1M pages
        # (benchmarks/soak.py). 10,000 keeps the dashboard's recent task history and bounds it.
        os.environ.setdefault("RAY_task_events_max_num_task_in_gcs", str(TASK_EVENTS_IN_GCS))
    # A local Ray's GCS is this crawl's own child: gone, it is not coming back. Ray's default 60 s of
    # reconnecting kept a crawl whose every process got SIGTERM (systemd's control-group stop,
    # `timeout`) alive a minute after it had committed what it could (measured: 61 s, now ~5).
    local = {"num_cpus": num_cpus, "include_dashboard": dashboard, "dashboard_host": "127.0.0.1",
             "_system_config": {"gcs_rpc_server_reconnect_timeout_s": GCS_GONE}}
    joined = {}
    forwarded = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    if address and forwarded and "RAY_JOB_CONFIG_JSON_ENV_VAR" not in os.environ:
        # A joined cluster's workers do not inherit this process's environment (a local Ray's do):
        # the variables the actors read go with this job. (Under `ray job submit` the job's own
        # runtime_env is the place, and Ray refuses a second value for one of its variables.)
        joined["runtime_env"] = {"env_vars": forwarded}
    if dashboard:
        from raycrawl.redis_server import free_port

        # Not Ray's 8265: a cluster started later on this machine insists on that one (no retries).
        local["dashboard_port"] = free_port()
    for attempt in range(1, attempts + 1):
        try:
            context = ray.init(address=address or "local", log_to_driver=log_to_driver, configure_logging=False,
                               **(joined if address else local))
            global _dashboard
            _dashboard = f"http://{context.dashboard_url}" if dashboard and context.dashboard_url else None
            return True
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception on startup timeouts
            ray.shutdown()
            if address or attempt == attempts:
                raise UserError(f"cannot start or join Ray ({address or 'local'}): {exc}") from None
            log.warning("Ray did not start (%s); retrying", exc)
    return False


def stop_ray() -> None:
    """``ray.shutdown()``, with Python's cyclic garbage collector held off meanwhile.

    Ray frees its core worker (C++) a moment before Python drops it: an ObjectRef or actor handle
    freed in that window asks the freed worker, and Ray then ends the whole process with exit code 1
    ("The core worker has already been shutdown ... The process will exit"). A collection runs in
    whichever thread allocates, so while the main thread shuts Ray down another thread (the Redis
    supervisor restarting Redis, say) could free the cycles a crash left (an exception's frames
    holding actor calls): a crawl stopped by a full disk then exited 1 without its one-line stop
    (CI, 2026-11-30). What is collectable is collected first, while the worker still answers."""
    import gc

    import ray

    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        ray.shutdown()
    finally:
        if enabled:
            gc.enable()
