"""A Ray cluster of the tests' own making (``ray.cluster_utils.Cluster``), never one already running
on the machine: the run's (tests/conftest.py) and the modules' that need nodes of their own."""

from __future__ import annotations

import os


def local_cluster(head_cpus: int, nodes: int = 0, env: dict[str, str] | None = None):
    """A head of ``head_cpus`` CPUs and ``nodes`` nodes of 1 CPU; its processes (and so every worker
    it starts) see this process's environment with ``env`` and without ``$RAY_ADDRESS`` (an address
    in a worker's environment would send the tasks it starts to another cluster)."""
    from ray.cluster_utils import Cluster

    keep = dict(os.environ)
    os.environ.pop("RAY_ADDRESS", None)
    os.environ.update(env or {})
    try:
        # no_monitor: the autoscaler's monitor has nothing to scale here and costs ~1.3 CPU-s a head
        cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": head_cpus, "include_dashboard": False, "no_monitor": True})
        for _ in range(nodes):
            cluster.add_node(num_cpus=1)
    finally:
        os.environ.clear()
        os.environ.update(keep)
    return cluster
