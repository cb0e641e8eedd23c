"""Shared fixtures: real servers only (embedded Redis, local Ray, websim on loopback)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


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


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray instance shared by the tests that need one (starting Ray costs ~5 s)."""
    import ray

    if not ray.is_initialized():
        # address="local": a cluster already running on the machine (a crawl, `ray start`) never interferes
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def websim(tmp_path_factory):
    """A running in-vitro web (60 hosts on 4 loopback IPs, seed 1), shared by the session.
    Its request log accumulates across tests: audit a Websim of your own for exact counts."""
    from raycrawl.websim import Websim

    with Websim(hosts=60, ips=4, seed=1, out_dir=tmp_path_factory.mktemp("websim")) as web:
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
