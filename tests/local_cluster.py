"""A Ray cluster of the tests' own making (``ray.cluster_utils.Cluster``), never one already running
on the machine: the run's (tests/conftest.py) and the modules' that need nodes of their own."""

from __future__ import annotations

import os

# Each node's workers listen on ports of a range of its own, as `ray start` nodes do (10002–19999),
# never on ports the kernel hands out (ray.cluster_utils' default): there a worker once took the
# port a test had freed to restart its S3 server on, and every later request of that test went to
# the worker's gRPC server ("Remote end closed connection without response"). Below 32768 (Linux's
# ephemeral ports start there) and above `ray start`'s own range (the crawls that start a Ray of
# their own), in blocks of WORKER_PORTS: the run's cluster gets the first, a module's the next ones.
FIRST_WORKER_PORT, WORKER_PORTS = 20000, 1000


def worker_ports(block: int) -> dict[str, int]:
    first = FIRST_WORKER_PORT + block * WORKER_PORTS
    assert first + WORKER_PORTS <= 32768, block
    return {"min_worker_port": first, "max_worker_port": first + WORKER_PORTS - 1}


# A test cluster lives through many jobs (every crawl that joins it is one), and two of Ray's
# defaults then cost it CPU for the rest of the run (measured on a head of 4 CPUs, as the run's was then):
# - its log monitor lists the log directory ten times a second while it holds under 1,000 files, and
#   checks every file of every worker that ever ran: after 160 actors had come and gone, 36.5 ms of
#   CPU a second, 18.5 when it lists it every 0.5 s (Ray's pace past the threshold; a new worker's
#   lines reach its driver up to 0.4 s later);
# - its raylet keeps up to a CPU's count of idle workers of a job alive for as long as the job runs
#   (a pytest worker that called Ray tasks in-process is one job for the whole run), at ~7 ms of CPU
#   a second each: released after IDLE_WORKER_MS instead.
IDLE_WORKER_MS = 10_000
LONG_LIVED = {"RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "1", "RAY_num_workers_soft_limit": "0",
              "RAY_idle_worker_killing_time_threshold_ms": str(IDLE_WORKER_MS)}


def local_cluster(head_cpus: int, nodes: int = 0, env: dict[str, str] | None = None, ports: int = 0):
    """A head of ``head_cpus`` CPUs and ``nodes`` nodes of 1 CPU; its processes (and so every worker
    it starts) see this process's environment with :data:`LONG_LIVED` and ``env`` and without
    ``$RAY_ADDRESS`` (an address in a worker's environment would send the tasks it starts to another
    cluster). Its workers listen on the blocks of ports from ``ports`` on (:func:`worker_ports`),
    one a node: clusters that may run at once take different blocks."""
    from ray.cluster_utils import Cluster

    keep = dict(os.environ)
    os.environ.pop("RAY_ADDRESS", None)
    os.environ.update({**LONG_LIVED, **(env or {})})
    try:
        # no_monitor: the autoscaler's monitor has nothing to scale here and costs ~1.3 CPU-s a head
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": head_cpus, "include_dashboard": False, "no_monitor": True, **worker_ports(ports)})
        for k in range(1, nodes + 1):
            cluster.add_node(num_cpus=1, **worker_ports(ports + k))
    finally:
        os.environ.clear()
        os.environ.update(keep)
    return cluster
