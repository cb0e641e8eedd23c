"""Shared fixtures: real servers only (embedded Redis, local Ray, websim on loopback)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# Every Ray node the tests start (the session's, the multi-node tests', the crawls' own) skips
# prestarting idle workers: the suite is CPU-bound on CI's two cores, and prestarted workers no
# test uses cost ~2 CPU-s each (54 s over a run); actors start their workers when created anyway.
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
os.environ.setdefault("RAY_enable_worker_prestart", "0")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One real embedded valkey-server for the session (AOF on)."""
    from raycrawl.redis_server import EmbeddedRedis

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The session server, emptied before each test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture(scope="session", autouse=True)
def ray_cluster():
    """One real Ray cluster per pytest worker (``ray.cluster_utils.Cluster``, a head of 2 CPUs), of
    this session's own making — never one that already runs on the machine. Every crawl and Ray
    task the tests start joins it through ``$RAY_ADDRESS``, which raycrawl honours as Ray does
    (core/ray_start.py): starting Ray's node processes costs a crawl ~5 s and ~5 CPU-seconds, and
    the suite runs dozens of crawls. Tests of what a crawl does with a Ray of its own (kill -9 of
    its process group, its dashboard) are marked ``own_ray``."""
    from ray.cluster_utils import Cluster

    # An S3 client without credentials asks the instance-metadata service (169.254.169.254) for a
    # role: here every process the tests start asks loopback instead (no traffic off 127.0.0.0/8).
    os.environ.setdefault("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
    # no_monitor: the autoscaler's monitor has nothing to scale here and costs ~1.3 CPU-s a head
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False, "no_monitor": True})
    os.environ["RAY_ADDRESS"] = cluster.address
    yield cluster.address
    os.environ.pop("RAY_ADDRESS", None)
    import ray

    ray.shutdown()  # a test that ran a command in-process may have joined it without ray_local
    cluster.shutdown()


@pytest.fixture(autouse=True)
def _own_ray(request, monkeypatch) -> None:
    """A test marked ``own_ray`` starts its crawls with a Ray of their own (no ``$RAY_ADDRESS``)."""
    if request.node.get_closest_marker("own_ray"):
        monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.fixture(scope="session")
def ray_local(ray_cluster):
    """The session's Ray cluster, joined by this process for the tests that use Ray in-process."""
    import ray

    if not ray.is_initialized():
        ray.init(address=ray_cluster, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def websim(tmp_path_factory):
    """A running in-vitro web (60 hosts on 4 loopback IPs, seed 1), shared by the session.
    Its request log accumulates across tests: audit a Websim of your own for exact counts."""
    from fault_crawl import SLOW_DELAY

    from raycrawl.websim import Websim

    with Websim(hosts=60, ips=4, seed=1, slow_delay=SLOW_DELAY, out_dir=tmp_path_factory.mktemp("websim")) as web:
        yield web


def pytest_collection_modifyitems(config, items) -> None:
    """Files with the most slow tests first (stable otherwise): ``make test`` hands whole files to
    two workers (``--dist loadfile``) in this order, and the long files started last would leave
    one worker idle while the other finishes them."""
    slow: dict[str, int] = {}
    for item in items:
        slow[item.fspath.strpath] = slow.get(item.fspath.strpath, 0) + (item.get_closest_marker("slow") is not None)
    order = {path: i for i, path in enumerate(dict.fromkeys(item.fspath.strpath for item in items))}
    items.sort(key=lambda item: (-slow[item.fspath.strpath], order[item.fspath.strpath]))
