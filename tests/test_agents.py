"""Several agents on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``) crawl one websim:
hosts split by consistent hashing, links batched to their owners' sieves, IP politeness shared
through Redis. Audited from websim's own request log and compared with a one-agent crawl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from storage.link_records import iter_link_records, read_link_file
from websim.audit import audit

REPO = Path(__file__).resolve().parents[1]
DELAYS = (0.1, 0.02)
MAX_URLS_PER_HOST = 40
# Near-duplicate link suppression off: which copy of a near-duplicate pair comes first (and has its
# links followed) depends on timing, so with it on the page set is not a function of the web alone.
CONFIG = ("[crawl]\nread_timeout = 3.0\nconnect_timeout = 2.0\nmax_retries = 1\nretry_backoff = 0.5\n"
          "max_crawl_delay = 1.0\nnear_dup = false\n")


def crawl_args(web, out: Path, config: Path) -> list[str]:
    return ["crawl", "--seeds", str(web.seeds_file), "--out", str(out), "--dns-server",
            "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--host-delay", str(DELAYS[0]),
            "--ip-delay", str(DELAYS[1]), "--max-urls-per-host", str(MAX_URLS_PER_HOST), "--config", str(config)]


# Runs in the driver of a cluster crawl with faults: once the crawl has committed `after` pages,
# kill (Ray restarts them) the named actors, one after the other; a fetch actor of agent A only
# while it has a request to one of A's hosts on the wire.
KILLER = """
def kill_later(out, names, after):
    import time, redis
    from pathlib import Path
    url_file = Path(out) / "redis-url"
    while not url_file.exists():
        time.sleep(0.1)
    client = redis.Redis.from_url(url_file.read_text().strip())
    for name in names:
        while int(client.hget("rc:stats", "pages") or 0) < after:
            time.sleep(0.05)
        pid = ray.get(ray.get_actor(name).__ray_call__.remote(lambda self: __import__("os").getpid()))
        if "-fetch-" in name:
            view = "rc:v:" + name.split(":")[-1].rsplit("-", 1)[0] + ":"
            # a host of that agent busy = a request on the wire (the result is not even buffered yet)
            while view.encode() not in (client.hmget("rc:howner", client.hkeys("rc:hbusy") or ["-"])):
                time.sleep(0.001)
        os.kill(pid, 9)  # the worker process dies as on a crash; Ray restarts the actor
        print("KILLED", name, flush=True)
        after += 40
"""


def crawl_on_cluster(args: list[str], nodes: int, cwd: Path, kill: list[str] = (),
                     after: int = 60) -> subprocess.CompletedProcess:
    """``raycrawl crawl ARGS`` in a driver joined to a fresh ``nodes``-node Cluster (1 CPU each);
    ``kill``: actors to kill mid-crawl."""
    out = args[args.index("--out") + 1]
    script = textwrap.dedent(
        f"""
        import os, sys, threading, ray
        from ray.cluster_utils import Cluster
        from raycrawl.cli import main
        cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 1, "include_dashboard": False}})
        for _ in range({nodes} - 1):
            cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        """) + KILLER + textwrap.dedent(f"""
        if {list(kill)!r}:
            threading.Thread(target=kill_later, args=({out!r}, {list(kill)!r}, {after}), daemon=True).start()
        try:
            rc = main({args!r})
        finally:
            ray.shutdown()
            cluster.shutdown()
        sys.exit(rc)
        """
    )
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env,
                          cwd=cwd)


def fetched(out: Path) -> set[str]:
    return {r["url"] for r in iter_link_records(out)}


@pytest.fixture(scope="module")
def web_and_baseline(tmp_path_factory):
    """A websim (40 hosts on 4 IPs) and a clean one-agent crawl of it; yields (web, baseline dir,
    config, tmp dir). Later crawls audit their own slice of the request log."""
    from websim import Websim

    tmp = tmp_path_factory.mktemp("agents")
    config = tmp / "crawl.toml"
    config.write_text(CONFIG)
    with Websim(hosts=40, ips=4, seed=11, out_dir=tmp / "web", pages_per_host_mean=6) as web:
        one = subprocess.run([sys.executable, "-m", "raycrawl", *crawl_args(web, tmp / "one", config)],
                             capture_output=True, text=True, timeout=600, cwd=REPO,
                             env=dict(os.environ, RAY_AUTH_MODE="disabled"))
        assert one.returncode == 0, one.stderr[-3000:]
        yield web, tmp / "one", config, tmp


def crawl_slice(web, args: list[str], nodes: int, cwd: Path, **kw):
    """Run a cluster crawl; return (process, its requests in websim's log, manifest)."""
    web.flush_log()
    n0 = len(web.requests())
    proc = crawl_on_cluster(args, nodes, cwd, **kw)
    assert proc.returncode == 0, proc.stderr[-3000:]
    web.flush_log()
    return proc, web.requests()[n0:], web.manifest


def same_pages(one: Path, two: Path, manifest) -> None:
    """The same pages as one agent crawling alone, up to what discovery order decides:
    - on hosts that hit --max-urls-per-host (traps), WHICH URLs are scheduled; there only the
      counts must agree;
    - which copy of duplicate pages comes first (its links are followed, the others' are not).
    So a page fetched by one crawl only must be linked, in websim's manifest, from a page that crawl
    fetched and the other did not, or from a page the other recorded as a duplicate."""
    recs = {d: {r["url"]: r for r in iter_link_records(d)} for d in (one, two)}
    per_host = {d: Counter(urlsplit(u).hostname for u in recs[d]) for d in recs}
    capped = {h for h, n in per_host[one].items() if n >= MAX_URLS_PER_HOST}
    assert len(capped) < 5
    assert all(per_host[one][h] == per_host[two][h] for h in capped)
    linked_from: dict[str, set[str]] = defaultdict(set)
    for url, page in manifest.pages.items():
        for target in [*page["links"], *([page["location"]] if page["location"] else [])]:
            linked_from[target].add(url)
    differ = 0
    for a, b in ((one, two), (two, one)):
        only_a = set(recs[a]) - set(recs[b])
        dups_b = {u for u, r in recs[b].items() if r["dup_of"]}
        for url in only_a:
            if urlsplit(url).hostname in capped:
                continue
            differ += 1
            assert linked_from[url] & (only_a | dups_b), f"{url} fetched by {a.name} only, not through discovery order"
    assert differ <= 0.02 * len(recs[one]), differ


@pytest.mark.slow
def test_two_agents_two_nodes_politeness_and_same_urls(web_and_baseline) -> None:
    web, one, config, tmp = web_and_baseline
    _, requests, manifest = crawl_slice(web, [*crawl_args(web, tmp / "two", config), "--agents", "2"], 2, tmp)
    report = audit(requests, manifest, *DELAYS)
    assert report.requests > 100
    assert report.ok, report.summary()
    rep = json.loads((tmp / "two" / "report.json").read_text())
    assert rep["stopped"] == "frontier empty"
    assert {a["agent"] for a in rep["agents"]} == {"agent0", "agent1"}
    assert all(a["pages"] > 0 for a in rep["agents"]), rep["agents"]
    # Both agents fetched, from distinct hosts, and hosts of one IP belong to both agents: the
    # IP politeness above held ACROSS agents.
    by_writer: dict[str, set[str]] = defaultdict(set)
    for path in (tmp / "two" / "links").glob("*.rec.gz"):
        writer = "agent1" if "agent1" in path.name else "agent0"
        by_writer[writer] |= {urlsplit(r["url"]).hostname for r in read_link_file(path)}
    assert by_writer["agent0"] and by_writer["agent1"] and not by_writer["agent0"] & by_writer["agent1"]
    ip_of = {r.host.split(":")[0]: r.ip for r in requests}
    shared = {ip_of[h] for h in by_writer["agent0"] if h in ip_of} & {ip_of[h] for h in by_writer["agent1"] if h in ip_of}
    assert shared, "no IP had hosts of both agents: the test would prove nothing"
    same_pages(one, tmp / "two", manifest)


@pytest.mark.slow
def test_killed_fetcher_and_parser(web_and_baseline) -> None:
    """Kill agent1's fetch actor and agent0's parser mid-crawl: Ray restarts them, the agent puts
    the dead fetcher's in-flight URLs back, the crawl completes with 0 politeness/robots violations,
    fetches again at most the URLs that were in flight, and fetches the same pages."""
    web, one, config, tmp = web_and_baseline
    proc, requests, manifest = crawl_slice(
        web, [*crawl_args(web, tmp / "faults", config), "--agents", "2"], 2, tmp,
        kill=["raycrawl-fetch-rc:agent1-0", "raycrawl-parser-rc:agent0"], after=60)
    assert proc.stdout.count("KILLED") == 2, proc.stdout
    rep = json.loads((tmp / "faults" / "report.json").read_text())
    assert rep["stopped"] == "frontier empty"
    assert rep["recovered"] > 0, "the killed fetcher had nothing in flight: the test proved nothing"
    report = audit(requests, manifest, *DELAYS)
    kinds = Counter(v.kind for v in report.violations)
    assert kinds["host"] == kinds["ip"] == kinds["robots"] == 0, report.summary()
    assert kinds["duplicate"] <= rep["recovered"], report.summary()
    same_pages(one, tmp / "faults", manifest)
