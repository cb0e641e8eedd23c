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
# Ray runs its workers (every actor of a crawl, a render actor's Chromium with it) at niceness 15,
# harmless on a machine of their own (they yield only to Ray's daemons); but the suite runs four
# files at once, and another file's websim, pytest and crawl driver (niceness 0) then weigh 28 times
# as much as this file's actors: a render crawl's renders took 9-23 s (past their time) where they
# take 1-8 s with every process equal (four at once: benchmarks/results/render_niceness_session26.txt).
os.environ.setdefault("RAY_worker_niceness", "0")


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


@pytest.fixture
def client(redis_url):
    """A redis-py client of the session's server (closed after the test)."""
    import redis

    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


_CLUSTER: list = []  # the run's Ray cluster, in the process that started it


def pytest_configure(config) -> None:
    """One real Ray cluster for the whole run (``ray.cluster_utils.Cluster``, a head of 2 CPUs), of
    this run's own making — never one that already runs on the machine — started by the process
    that spawns pytest's workers, which inherit ``$RAY_ADDRESS``. Every crawl and Ray task the
    tests start joins it, as raycrawl honours ``$RAY_ADDRESS`` as Ray does (core/ray_start.py):
    starting Ray's node processes costs a crawl ~5 s and ~5 CPU-seconds, and the suite runs dozens
    of crawls; one cluster per worker cost each worker a head and its idle load (~2.5 % of a core,
    measured). Crawls of different workers do not meet in it: each driver is a job of its own,
    whose actors are named in the job's own namespace. Tests of what a crawl does with a Ray of
    its own (kill -9 of its process group, its dashboard) are marked ``own_ray``. Two CPUs, as
    the machine (CI's) has and as a crawl's own local Ray takes: a Ray task holds one, and a head of
    four started four task workers (~1.5 CPU-s each) for a map that two finish as soon on two
    cores (the spam, rank and shard files: 91 against 96 CPU-s, measured)."""
    # An S3 client without credentials asks the instance-metadata service (169.254.169.254) for a
    # role: here every process the tests start asks loopback instead (no traffic off 127.0.0.0/8).
    os.environ.setdefault("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
    if os.environ.get("PYTEST_XDIST_WORKER") or config.option.collectonly:
        return  # a worker joins the cluster its controller started
    from local_cluster import local_cluster

    cluster = local_cluster(2)
    os.environ["RAY_ADDRESS"] = cluster.address
    _CLUSTER.append(cluster)


def pytest_unconfigure(config) -> None:
    if _CLUSTER:
        import ray

        ray.shutdown()  # a test that ran a command in-process may have joined it without ray_local
        _CLUSTER.pop().shutdown()
        os.environ.pop("RAY_ADDRESS", None)


@pytest.fixture(scope="session", autouse=True)
def ray_cluster():
    """The address of the run's Ray cluster (:func:`pytest_configure`)."""
    yield os.environ["RAY_ADDRESS"]
    import ray

    ray.shutdown()  # a test that ran a command in-process may have joined it without ray_local


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


# The unit tests of the numba kernels (graph codes, BV graphs, Elias-Fano, summaries, search) run
# in one worker, one file after the other: in a clean clone each kernel is compiled by the first
# process that calls it and cached for the rest, and these files on four workers at once compiled
# the same kernels side by side (125 against 88 CPU-s for these files, measured). The unit goes out
# first: other processes that call the same kernels (a graph or index built by a crawl test, the
# rank tasks' workers) then load them from the cache instead of compiling them beside it (a clean
# clone's run had the unit start at 403 s, and the render crawl's graph test compile the graph's
# kernels at 409 s: 9 CPU-s of its own).
KERNEL_FILES = frozenset({
    "test_bvgraph.py", "test_bvgraph_codes.py", "test_bvgraph_writer.py", "test_elias_fano.py",
    "test_graph_encodings.py", "test_webgraph_ef.py", "test_crawl_graph.py", "test_summaries.py",
    "test_summaries_writer.py", "test_search_daat.py", "test_index_fragments.py", "test_index_update.py",
    "test_search_temporal.py",
})


KERNELS = "numba-kernels"


def _scope(path: str) -> str:
    """What one worker runs as a unit: a file, or all of :data:`KERNEL_FILES`."""
    name = path.rsplit("/", 1)[-1]
    return KERNELS if name in KERNEL_FILES else path


@pytest.hookimpl(optionalhook=True)  # pytest -p no:xdist does not know the hook
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with :data:`KERNEL_FILES` as one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class KernelsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(super()._split_scope(nodeid))

    return KernelsTogether(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    """The kernels' unit first (:data:`KERNEL_FILES`), then the longest units first
    (longest-processing-time-first): ``make test`` hands whole files (and
    the kernels' files as one unit) to its workers in this order (``--dist loadfile
    --no-loadscope-reorder``), so the long ones start early and the short ones fill the gaps at
    the end, instead of a long file started last keeping one worker busy while the others idle
    (~60 s of a 10-minute run, measured). The seconds per file (tests/file_seconds.json, from one
    ``make test``; regenerate with ``RAYCRAWL_FILE_SECONDS=tests/file_seconds.json make test``)
    only order the files: stale or missing entries cost balance, never a test. Unlisted files
    count by their slow tests."""
    import json
    from pathlib import Path

    seconds = json.loads((Path(__file__).parent / "file_seconds.json").read_text())
    paths = [item.nodeid.split("::", 1)[0] for item in items]
    scopes = [_scope(path) for path in paths]
    weight: dict[str, float] = dict.fromkeys(scopes, 0)
    for path, scope in dict.fromkeys(zip(paths, scopes, strict=True)):  # each file once
        weight[scope] += seconds.get(path.rsplit("/", 1)[-1], 0)
    for item, path, scope in zip(items, paths, scopes, strict=True):
        if path.rsplit("/", 1)[-1] not in seconds:
            weight[scope] += 5 * (item.get_closest_marker("slow") is not None)
    if KERNELS in weight:
        weight[KERNELS] = float("inf")
    first = {scope: i for i, scope in enumerate(dict.fromkeys(scopes))}
    ranked = sorted(zip(items, paths, scopes, strict=True), key=lambda ips: (-weight[ips[2]], first[ips[2]], ips[1]))
    items[:] = [item for item, _, _ in ranked]


_STARTED: dict[str, float] = {}
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location) -> None:
    if os.environ.get("RAYCRAWL_FILE_SECONDS"):
        import time

        _STARTED[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location) -> None:
    import time

    if nodeid in _STARTED:
        name = nodeid.split("::")[0].rsplit("/", 1)[-1]
        _FILE_SECONDS[name] = _FILE_SECONDS.get(name, 0) + time.monotonic() - _STARTED.pop(nodeid)


def pytest_sessionfinish(session) -> None:
    """With ``$RAYCRAWL_FILE_SECONDS``: the run's seconds per file (summed over its tests, as the
    controller saw them), written there for :func:`pytest_collection_modifyitems`."""
    path = os.environ.get("RAYCRAWL_FILE_SECONDS")
    if path and not os.environ.get("PYTEST_XDIST_WORKER") and _FILE_SECONDS:
        import json
        from pathlib import Path

        ranked = sorted(((name, round(sec)) for name, sec in _FILE_SECONDS.items() if sec >= 3), key=lambda kv: -kv[1])
        Path(path).write_text(json.dumps(dict(ranked), indent=0) + "\n")
