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
from fault_crawl import SLOW_DELAY

from raycrawl.storage.link_records import iter_link_records, read_link_file
from raycrawl.websim.audit import audit

REPO = Path(__file__).resolve().parents[1]
DELAYS = (0.1, 0.02)
MAX_URLS_PER_HOST = 40
# Near-duplicate link suppression off: which copy of a near-duplicate pair comes first (and has its
# links followed) depends on timing, so with it on the page set is not a function of the web alone.
CONFIG = ("[crawl]\nread_timeout = 3.0\nconnect_timeout = 2.0\nmax_retries = 1\nretry_backoff = 0.5\n"
          "max_crawl_delay = 1.0\nnear_dup = false\n"
          "workbench_urls_per_host = 3\n")  # hosts with more URLs spill to the virtualizer, which must move too


def crawl_args(web, out: Path, config: Path) -> list[str]:
    return ["crawl", "--seeds", str(web.seeds_file), "--out", str(out), "--dns-server",
            "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--host-delay", str(DELAYS[0]),
            "--ip-delay", str(DELAYS[1]), "--max-urls-per-host", str(MAX_URLS_PER_HOST), "--config", str(config)]


# Runs in the driver of a cluster crawl with faults: once the crawl has committed `after` pages,
# kill (Ray restarts them) the named actors, one after the other; a fetch actor of agent A only
# while it has a request to one of A's hosts on the wire.
KILLER = """
def crawl_redis(out):
    import time, redis
    from pathlib import Path
    url_file = Path(out) / "redis-url"
    deadline = time.time() + 180  # a crawl that stopped before it began must fail the test, not hang it
    while not url_file.exists():
        if time.time() > deadline:
            raise RuntimeError(f"the crawl never wrote {url_file}")
        time.sleep(0.1)
    return redis.Redis.from_url(url_file.read_text().strip())

def freeze(client, until=lambda: True):
    # Redis takes no write until thaw(): what it holds in flight now is exactly what a fault just
    # after can leave to be fetched again (the bound the test checks websim's log against).
    # ``until``: a state to catch, checked while frozen so it still holds at the fault.
    import json, time
    client.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
    while not until():
        thaw(client)
        time.sleep(0.001)
        client.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
    print("INFLIGHT", json.dumps(sorted(k.decode() for k in client.hkeys("rc:inflight"))), flush=True)

def thaw(client):
    client.execute_command("CLIENT", "UNPAUSE")

def wait_pages(client, after):
    import time
    deadline = time.time() + 300
    while int(client.hget("rc:stats", "pages") or 0) < after:
        if time.time() > deadline:
            raise RuntimeError(f"the crawl never committed {after} pages")
        time.sleep(0.05)

def kill_later(out, names, after):
    import time
    client = crawl_redis(out)
    for name in names:
        wait_pages(client, after)
        pid = ray.get(ray.get_actor(name).__ray_call__.remote(lambda self: __import__("os").getpid()))
        busy = lambda: True
        if "-fetch-" in name:
            actor = ray.get_actor(name)
            held = lambda: sum(ray.get(actor.__ray_call__.remote(lambda self: (len(self.loop.tasks), len(self.loop.done)))))
            # Something of its own to lose: a request on the wire or a result not drained yet. (Redis
            # holding writes does not stop the fetcher, which reads what is on the wire; the agent,
            # its commit held, drains no more: looked at again 0.2 s later, it is still there.)
            busy = lambda: held() > 0 and (time.sleep(0.2) or held() > 0)
        freeze(client, busy)
        os.kill(pid, 9)  # the worker process dies as on a crash; Ray restarts the actor
        thaw(client)
        print("KILLED", name, flush=True)
        after += 30
"""


# Runs in the driver of an elastic crawl: once the crawl has committed `after` pages, change the
# cluster (JOIN: add an agent node; LEAVE: remove agent1's node; REDIS: stop Redis, which flushes
# its AOF, and start it again on the same port and data).
CHANGES = """
def change_later(out, what, after):
    import time
    client = crawl_redis(out)
    wait_pages(client, after)
    if what == "join":
        # Writes held until the watcher has seen the node and named its agent: starting a node
        # takes seconds on a loaded machine, and the crawl must not end before it is noticed.
        client.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
        cluster.add_node(num_cpus=1, resources={"agent": 1})
        deadline = time.time() + 25
        while time.time() < deadline:
            try:
                ray.get_actor("raycrawl-rc:agent1")
                break
            except ValueError:
                time.sleep(0.1)
        thaw(client)
    elif what == "leave":
        node_id = ray.get(ray.get_actor("raycrawl-rc:agent1").__ray_call__.remote(
            lambda self: __import__("ray").get_runtime_context().get_node_id()))
        freeze(client)
        cluster.remove_node(next(n for n in cluster.worker_nodes if n.node_id == node_id))
        thaw(client)
    elif what == "redis":
        freeze(client)
        server.stop()
        time.sleep(3)
        server.start()
    print("CHANGED", what, int(client.hget("rc:stats", "pages")), flush=True)
"""


def crawl_on_cluster(args: list[str], nodes: int, cwd: Path, kill: list[str] = (),
                     after: int = 60, change: str = "", agent_nodes: bool = False,
                     redis_port: int = 0, env: dict[str, str] | None = None,
                     address: str = "") -> subprocess.CompletedProcess:
    """``raycrawl crawl ARGS`` in a driver joined to a fresh ``nodes``-node Cluster (1 CPU each), or
    to the running cluster at ``address`` (the module's, see ``two_nodes``: no ``change`` then);
    ``kill``: actors to kill mid-crawl; ``change``: a cluster change mid-crawl (see CHANGES);
    ``agent_nodes``: the head has no ``agent`` resource and ``nodes`` workers have it (as in
    ray_cluster.yaml); ``redis_port``: the driver runs the crawl's Redis (``--redis-url``) there;
    ``env``: the driver's environment (its nodes' processes inherit it)."""
    assert not (address and change in ("join", "leave")), "a cluster change needs a cluster of the crawl's own"
    out = args[args.index("--out") + 1]
    script = textwrap.dedent(
        f"""
        import os, sys, threading, ray
        from pathlib import Path
        from ray.cluster_utils import Cluster
        from raycrawl.cli import main
        from raycrawl.redis_server import EmbeddedRedis
        cluster = None
        if not {address!r}:
            cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 1, "include_dashboard": False, "no_monitor": True}})
            for _ in range({nodes} - {0 if agent_nodes else 1}):
                cluster.add_node(num_cpus=1, resources={{"agent": 1}} if {agent_nodes} else {{}})
        ray.init(address={address!r} or cluster.address, log_to_driver=False, configure_logging=False)
        server = EmbeddedRedis(Path({out!r} + "-redis"), port={redis_port}).start() if {redis_port} else None
        """) + KILLER + CHANGES + textwrap.dedent(f"""
        if {list(kill)!r}:
            threading.Thread(target=kill_later, args=({out!r}, {list(kill)!r}, {after}), daemon=True).start()
        result = []
        try:
            if {change!r}:  # Cluster.add_node must run in the main thread: the crawl runs in another
                crawl = threading.Thread(target=lambda: result.append(main({args!r})), daemon=True)
                crawl.start()
                try:
                    change_later({out!r}, {change!r}, {after})
                except BaseException:  # the harness failed, not the crawl: say so, do not wait for it
                    import traceback
                    traceback.print_exc()
                    os._exit(3)
                crawl.join()
                rc = result[0] if result else 1
            else:
                rc = main({args!r})
        finally:
            ray.shutdown()
            if cluster is not None:
                cluster.shutdown()
            if server is not None:
                server.stop()
        sys.exit(rc)
        """
    )
    env = dict(env or os.environ, RAY_AUTH_MODE="disabled", PYTHONPATH=str(REPO))
    return run_or_dump([sys.executable, "-c", script], env, cwd)


def run_or_dump(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 420) -> subprocess.CompletedProcess:
    """Run the crawl driver; if it outlives ``timeout`` (well inside pytest's own limit), fail with
    what it said and where each of its threads was (py-spy), not with pytest's bare timeout."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:  # py-spy comes with ray[default]
            spy = subprocess.run([str(Path(sys.executable).with_name("py-spy")), "dump", "--pid", str(proc.pid)],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            spy = subprocess.CompletedProcess([], 1, "", str(exc))
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"crawl driver still running after {timeout:.0f} s\n--- stdout\n{out[-2000:]}\n"
                    f"--- stderr\n{err[-6000:]}\n--- py-spy\n{spy.stdout[-8000:]}{spy.stderr[-500:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def fetched(out: Path) -> set[str]:
    return {r.url for r in iter_link_records(out)}


@pytest.fixture(scope="module")
def web_and_baseline(tmp_path_factory):
    """A websim (40 hosts on 4 IPs) and a clean one-agent crawl of it; yields (web, baseline dir,
    config, tmp dir). Later crawls audit their own slice of the request log."""
    from raycrawl.websim import Websim

    tmp = tmp_path_factory.mktemp("agents")
    config = tmp / "crawl.toml"
    config.write_text(CONFIG)
    with Websim(hosts=40, ips=4, seed=11, out_dir=tmp / "web", pages_per_host_mean=6, slow_delay=SLOW_DELAY) as web:
        one = subprocess.run([sys.executable, "-m", "raycrawl", *crawl_args(web, tmp / "one", config)],
                             capture_output=True, text=True, timeout=600, cwd=REPO,
                             env=dict(os.environ, RAY_AUTH_MODE="disabled"))
        assert one.returncode == 0, one.stderr[-3000:]
        yield web, tmp / "one", config, tmp


@pytest.fixture(scope="module")
def two_nodes():
    """A two-node Ray cluster (head and one node, 1 CPU each) the crawls that do not change their
    cluster share: a node's start costs ~5 CPU-s, and each test started two of its own."""
    from local_cluster import local_cluster

    cluster = local_cluster(1, nodes=1, ports=2)
    yield cluster.address
    cluster.shutdown()


def crawl_slice(web, args: list[str], nodes: int, cwd: Path, **kw):
    """Run a cluster crawl; return (process, its requests in websim's log, manifest)."""
    web.flush_log()
    n0 = len(web.requests())
    proc = crawl_on_cluster(args, nodes, cwd, **kw)
    print(proc.stderr[-6000:])  # pytest shows it when a later check fails
    assert proc.returncode == 0, proc.stderr[-3000:]
    web.flush_log()
    return proc, web.requests()[n0:], web.manifest


def components(edges: dict[str, set[str]]) -> list[set[str]]:
    """The connected components of an undirected graph given as node → neighbours."""
    parent: dict[str, str] = {}

    def root(k: str) -> str:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    for a, near in edges.items():
        for b in near:
            parent[root(b)] = root(a)
        root(a)
    out: dict[str, set[str]] = defaultdict(set)
    for k in parent:
        out[root(k)].add(k)
    return list(out.values())


def same_pages(one: Path, two: Path, manifest) -> None:
    """The same pages as one agent crawling alone, up to what discovery order decides:
    - on hosts that hit --max-urls-per-host (traps), WHICH URLs are scheduled; there only the
      counts must agree;
    - which copy of duplicate pages comes first (its links are followed, the others' are not).
    So a page fetched by one crawl only must be linked, in websim's manifest, from a page that crawl
    fetched and the other did not, or from a page the other recorded as a duplicate. What is
    bounded is the number of divergences: the pages one crawl only fetched, grouped by the
    manifest's links among them (a different representative of a duplicate cluster brings a whole
    subtree with it) and by host for a host the other crawl never reached, count once a group."""
    recs = {d: {r.url: r for r in iter_link_records(d)} for d in (one, two)}
    per_host = {d: Counter(urlsplit(u).hostname for u in recs[d]) for d in recs}
    # A capped host both crawls reached: equal counts. A host one crawl never reached (its only way
    # in was a page of a capped host that this crawl's order did not schedule) is a discovery
    # difference like any other: its pages are explained below, and it counts once.
    capped = {h for h, n in per_host[one].items() if n >= MAX_URLS_PER_HOST and per_host[two][h]}
    assert len(capped) < 5
    unequal = {h: (per_host[one][h], per_host[two][h]) for h in capped if per_host[one][h] != per_host[two][h]}
    assert not unequal, f"capped hosts' URL counts (alone, {two.name}): {unequal}"
    linked_from: dict[str, set[str]] = defaultdict(set)
    for url, page in manifest.pages.items():
        for target in [*page["links"], *([page["location"]] if page["location"] else [])]:
            linked_from[target].add(url)
    groups: list[set[str]] = []
    for a, b in ((one, two), (two, one)):
        only_a = set(recs[a]) - set(recs[b])
        dups_b = {u for u, r in recs[b].items() if r.dup_of}
        unreached = {h for h in per_host[a] if not per_host[b][h]}
        edges: dict[str, set[str]] = {}
        for url in only_a:
            host = urlsplit(url).hostname
            if host in capped:
                continue
            assert linked_from[url] & (only_a | dups_b), f"{url} fetched by {a.name} only, not through discovery order"
            edges[url] = (linked_from[url] & only_a) | ({f"host:{host}"} if host in unreached else set())
        groups += [{f"{a.name} only: {k}" for k in g} for g in components(edges)]
    assert len(groups) <= 0.02 * len(recs[one]), "\n".join(str(sorted(g)[:3]) for g in groups)


@pytest.mark.slow
def test_two_agents_two_nodes_politeness_and_block(web_and_baseline, two_nodes) -> None:
    """Two agents on two nodes, one crawl, judged by websim's request log: IP politeness held ACROSS
    agents (hosts of one IP belong to both), no URL fetched twice, hosts split between the agents,
    exact copies on hosts of different agents recorded as duplicates of one original; and
    ``raycrawl ctl block`` mid-crawl reaches every agent: from the command on (plus the fetches in
    flight, within the read timeout) no request to the blocked host, whichever agent owns it, and
    the crawl still ends with every other host the one-agent crawl reached. (The one-agent crawl's
    exact page set is checked by the fault tests below, on crawls with nothing blocked.)"""
    import threading
    import time

    web, one, config, tmp = web_and_baseline
    out = tmp / "two"
    m = web.manifest
    sizes = Counter(urlsplit(r.url).hostname for r in iter_link_records(one))
    seed_hosts = {urlsplit(u).hostname for u in m.seeds}
    blocked = next(h for h, _ in sizes.most_common() if h not in seed_hosts)
    # The copies of websim's exact-copy clusters that lie on two hosts are seeds too. A host capped
    # by --max-urls-per-host schedules the first URLs found, and in which order two agents find
    # them is timing: once, the copies on a capped seed host were not among its first 40, and no
    # fetched cluster spanned both agents (exact_duplicates_across_agents then proves nothing).
    seeds = tmp / "two-seeds.txt"
    copies = [u for c in m.clusters if c["kind"] == "exact" and len({urlsplit(v).hostname for v in c["urls"]}) > 1
              for u in c["urls"]]
    seeds.write_text(web.seeds_file.read_text() + "".join(f"{u}\n" for u in copies))
    args = crawl_args(web, out, config)
    args[args.index("--seeds") + 1] = str(seeds)
    result: list = []
    web.flush_log()
    n0 = len(web.requests())
    crawl = threading.Thread(target=lambda: result.append(
        crawl_on_cluster([*args, "--agents", "2"], 2, tmp, address=two_nodes)), daemon=True)
    crawl.start()
    deadline = time.time() + 240
    while not (out / "redis-url").exists() or not (out / "links").is_dir() or not any((out / "links").iterdir()):
        assert crawl.is_alive() and time.time() < deadline, result[0].stderr[-3000:] if result else "crawl gone"
        time.sleep(0.2)
    r = subprocess.run([sys.executable, "-m", "raycrawl", "ctl", str(out), "block", blocked],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    t_block = time.time()
    crawl.join(600)
    assert result and result[0].returncode == 0, result[0].stderr[-3000:] if result else "no result"
    web.flush_log()
    requests = web.requests()[n0:]
    report = audit(requests, m, *DELAYS)
    assert report.requests > 100
    assert report.ok, report.summary()
    rep = json.loads((out / "report.json").read_text())
    assert rep["stopped"] == "frontier empty"
    assert {a["agent"] for a in rep["agents"]} == {"agent0", "agent1"}
    assert all(a["pages"] > 0 for a in rep["agents"]), rep["agents"]
    # Both agents fetched, from distinct hosts, and hosts of one IP belong to both agents: the
    # IP politeness above held ACROSS agents.
    by_writer: dict[str, set[str]] = defaultdict(set)
    for path in (out / "links").glob("*.rec.gz"):
        writer = "agent1" if "agent1" in path.name else "agent0"
        by_writer[writer] |= {urlsplit(r.url).hostname for r in read_link_file(path)}
    assert by_writer["agent0"] and by_writer["agent1"] and not by_writer["agent0"] & by_writer["agent1"]
    ip_of = {r.host.split(":")[0]: r.ip for r in requests}
    shared = {ip_of[h] for h in by_writer["agent0"] if h in ip_of} & {ip_of[h] for h in by_writer["agent1"] if h in ip_of}
    assert shared, "no IP had hosts of both agents: the test would prove nothing"
    exact_duplicates_across_agents(out, m, by_writer, f"membership: {rep['membership']}\n{result[0].stderr[-4000:]}")
    late = [(q.host, q.target) for q in requests if q.host.split(":")[0] == blocked and q.start > t_block + 5]
    assert late == [], late[:3]
    # Which URLs of a host capped by --max-urls-per-host are scheduled depends on discovery order
    # (same_pages): through such a host only the pages both crawls fetched count (a host linked only
    # from another of its pages was once missed that way).
    capped = {h for h, n in sizes.items() if n >= MAX_URLS_PER_HOST}
    both = fetched(one) & fetched(out)
    reachable = {m.pages[u]["host"] for u in m.reachable(
        skip=lambda u: m.pages[u]["host"] == blocked or (m.pages[u]["host"] in capped and u not in both))}
    wanted = (set(sizes) & reachable) - {blocked}
    got = {urlsplit(rec.url).hostname for rec in iter_link_records(out)}
    assert wanted <= got, sorted(wanted - got)


def exact_duplicates_across_agents(out: Path, manifest, by_writer: dict[str, set[str]], why: str = "") -> None:
    """websim's exact-copy clusters (the same visible text on several pages), crawled by two agents
    whose duplicate stores each hold half the digests: in every cluster the crawl fetched, exactly one
    page is the original and every other one is recorded as its duplicate, also where the copies are
    on hosts of different agents (which must happen, or this proves nothing)."""
    recs = {r.url: r for r in iter_link_records(out) if r.status == 200}
    across = 0
    for cluster in manifest.clusters:
        if cluster["kind"] != "exact":
            continue
        got = [u for u in cluster["urls"] if u in recs]
        if len(got) < 2:
            continue
        firsts = [u for u in got if not recs[u].dup_of]
        assert len(firsts) == 1, (cluster["urls"], [(u, recs[u].dup_of) for u in got])
        assert all(recs[u].dup_of == firsts[0] and recs[u].dup_kind == "exact" for u in got if u != firsts[0])
        agents = {a for u in got for a, hosts in by_writer.items() if urlsplit(u).hostname in hosts}
        across += len(agents) > 1
    assert across, f"no exact-copy cluster spanned both agents: {dict(by_writer)}\n{why}"


@pytest.mark.slow
def test_killed_fetcher_sieve_and_parsing_workers(web_and_baseline, two_nodes) -> None:
    """Kill agent1's fetch actor and both agents' workers (each carrying its agent's sieve, parser,
    store and summary writer: actors/cluster/crew_worker.py) mid-crawl: Ray restarts them (the sieve reopens its shards from the map in
    Redis and replays their pending logs, the stores and summary writers start new files, the
    summaries of a batch parsed before the kill come from its bodies, all get their interrupted
    call again), the agent puts the dead fetcher's in-flight URLs back, the crawl
    completes with 0 politeness/robots violations, fetches again at most the URLs that were in
    flight, fetches the same pages, and every HTML page it kept has its summary spilled."""
    web, one, config, tmp = web_and_baseline
    proc, requests, manifest = crawl_slice(
        web, [*crawl_args(web, tmp / "faults", config), "--agents", "2"], 2, tmp,
        kill=["raycrawl-fetch-rc:agent1-0", "raycrawl-worker-rc:agent0", "raycrawl-worker-rc:agent1"], after=60,
        address=two_nodes)
    assert proc.stdout.count("KILLED") == 3, proc.stdout
    rep = json.loads((tmp / "faults" / "report.json").read_text())
    assert rep["stopped"] == "frontier empty"
    in_flight = in_flight_at_faults(proc)
    assert rep["recovered"] > 0 and in_flight, "the killed fetcher had nothing in flight: the test proved nothing"
    check_against_baseline(one, tmp / "faults", requests, manifest, may_refetch=in_flight)
    from raycrawl.actors.visit.parser import HTML_TYPES
    from raycrawl.storage.summary_spill import iter_spill, spill_paths

    # the pages of a crawl (docs: storage/crawl_pages.py): whole 200 HTML responses, not duplicates
    kept = {r.url for r in iter_link_records(tmp / "faults")
            if r.status == 200 and r.ctype in HTML_TYPES and not r.dup_of and not r.error}
    assert kept and kept <= {r["url"] for r in iter_spill(spill_paths(tmp / "faults"))}


def in_flight_at_faults(proc) -> set[str]:
    """The URLs Redis held in flight at each fault (the driver's INFLIGHT lines, see freeze())."""
    from raycrawl.actors.frontier.workbench import inflight_url

    return {inflight_url(k) for line in proc.stdout.splitlines() if line.startswith("INFLIGHT ")
            for k in json.loads(line.split(" ", 1)[1])}


def check_against_baseline(one: Path, out: Path, requests, manifest, may_refetch: set[str]) -> dict:
    """The crawl in ``out`` ended with an empty frontier, 0 host/IP/robots violations, no URL
    fetched twice but those in ``may_refetch`` (websim's log), and the one-agent crawl's pages.
    Returns its report."""
    rep = json.loads((out / "report.json").read_text())
    assert rep["stopped"] == "frontier empty"
    assert rep["frontier"]["queued"] == rep["frontier"]["inflight"] == 0
    report = audit(requests, manifest, *DELAYS)
    kinds = Counter(v.kind for v in report.violations)
    assert kinds["host"] == kinds["ip"] == kinds["robots"] == 0, report.summary()
    twice = {v.key for v in report.violations if v.kind == "duplicate"}
    assert twice <= may_refetch, sorted(twice - may_refetch)[:10]
    same_pages(one, out, manifest)
    return rep


def writers(out: Path) -> Counter:
    """Pages recorded per agent (link files are named after their writer)."""
    return Counter(path.name.split("-")[0] for path in (out / "links").glob("*.rec.gz") for _ in read_link_file(path))


@pytest.mark.slow
def test_node_joins_mid_crawl_without_a_shared_out(web_and_baseline) -> None:
    """--elastic on one agent node; a second agent node joins mid-crawl: its new agent takes a share
    of the shards (hosts, queued URLs, seen-sets) and fetches; nothing is lost and — no agent
    died — nothing is fetched twice. No shared OUT: with --out-store and --agent-dir every agent
    works in a directory of its own, so the newcomer's share of the seen-sets, output queues and
    virtual queues could only reach it through the object store (moto's S3 server on loopback);
    a graph built from the store equals the one built from the driver's copy."""
    from s3_server import BUCKET, MotoS3, environ

    web, one, config, tmp = web_and_baseline
    out, agents = tmp / "join", tmp / "join-agents"
    with MotoS3() as s3:
        env = {**environ(s3), "RAYCRAWL_STORE_CACHE": str(tmp / "join-cache")}
        store = f"s3://{BUCKET}/join"
        proc, requests, manifest = crawl_slice(
            web, [*crawl_args(web, out, config), "--elastic", "--out-store", store, "--agent-dir", str(agents),
                  # A page counts once its piece is in the store, a second or so after its fetch:
                  # a slower crawl (the audit's delays are minimums) is still on when the newcomer
                  # has started, counted pages or not.
                  "--ship-seconds", "0.5", "--host-delay", "0.3"],
            1, tmp, change="join", agent_nodes=True, after=30, env=env)
        assert "CHANGED join" in proc.stdout, proc.stderr[-3000:]
        rep = check_against_baseline(one, out, requests, manifest, may_refetch=set())
        (event,) = rep["membership"]
        assert event["joined"] == ["agent1"] and event["left"] == [] and event["hosts_moved"] > 0, event
        assert writers(out)["agent1"] > 0, writers(out)
        assert rep["virtualized"] > 0  # URLs waited on disk (and moved with their hosts)
        # Each agent kept its own files; the shards went back to the store at the end.
        (crawl,) = agents.iterdir()
        assert sorted(p.name for p in crawl.iterdir()) == ["agent0", "agent1"]
        for agent in ("agent0", "agent1"):
            own = crawl / agent
            assert not (own / "sieve").exists() or not any((own / "sieve").iterdir())
            names = [p.name for p in (own / "warc").iterdir()]
            assert names and all(f"-{agent}-" in n or n.startswith(agent) for n in names), names
        assert not (out / "sieve").exists() and not (out / "warc").exists() and not list(out.rglob("*.q"))
        stored = s3.objects("join")
        assert {k.split("/")[1] for k in stored if k.startswith("sieve/")} == {f"{i:02d}" for i in range(64)}
        assert {k for k in stored if k.startswith("warc/")} == {
            f"warc/{p.name}" for a in ("agent0", "agent1") for p in (crawl / a / "warc").iterdir()}
        # The WARC files in the store (the driver has none) hold every page websim served (a response,
        # or a revisit of an identical payload).
        from archive_check import served_pages, stored_pages

        served, in_store = served_pages(web, requests), stored_pages(stored, tmp / "join-warcs")
        assert served and served <= in_store, sorted(served - in_store)[:5]
        r = subprocess.run([sys.executable, "-m", "raycrawl", "graph", "build", store], capture_output=True,
                           text=True, env=env, cwd=tmp, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        r = subprocess.run([sys.executable, "-m", "raycrawl", "graph", "build", str(out)], capture_output=True,
                           text=True, env=env, cwd=tmp, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        graph = {k[len("graph/"):]: v for k, v in s3.objects("join").items()
                 if k.startswith("graph/") and not k.endswith((".png", "graph.json"))}
        local = {p.name: p.read_bytes() for p in (out / "graph").iterdir()
                 if p.is_file() and not p.name.endswith((".png", "graph.json"))}
        assert len(local) > 5 and graph == local


@pytest.mark.slow
def test_node_leaves_mid_crawl(web_and_baseline) -> None:
    """--elastic on two agent nodes; agent1's node is removed mid-crawl: agent0 takes over its
    shards from Redis and the shared sieve directory. Only URLs in flight at the death are fetched
    again (Redis's in-flight set at the removal bounds them, checked in websim's log)."""
    leave_mid_crawl(web_and_baseline, "leave")


def leave_mid_crawl(web_and_baseline, name: str) -> None:
    """The body of test_node_leaves_mid_crawl, into OUT ``name`` (benchmarks/leave_in_a_row.py runs
    it many times)."""
    web, one, config, tmp = web_and_baseline
    out = tmp / name
    proc, requests, manifest = crawl_slice(web, [*crawl_args(web, out, config), "--elastic"], 2, tmp,
                                           change="leave", agent_nodes=True, after=60)
    assert "CHANGED leave" in proc.stdout, proc.stderr[-3000:]
    rep = check_against_baseline(one, out, requests, manifest, may_refetch=in_flight_at_faults(proc))
    (event,) = rep["membership"]
    assert event["left"] == ["agent1"] and event["joined"] == [], event
    assert {a["agent"]: a["stopped"] for a in rep["agents"]} == {"agent0": "frontier empty", "agent1": "died"}
    assert writers(out)["agent0"] > writers(out)["agent1"] > 0, writers(out)


@pytest.mark.slow
def test_redis_restart_mid_crawl(web_and_baseline, two_nodes) -> None:
    """Two agents; Redis (AOF on) is stopped mid-crawl and started again 3 s later on the same port
    and data: the crawl waits, then goes on to the end, with the one-agent crawl's pages."""
    from raycrawl.redis_server import free_port

    web, one, config, tmp = web_and_baseline
    out = tmp / "redis-restart"
    port = free_port()
    proc, requests, manifest = crawl_slice(
        web, [*crawl_args(web, out, config), "--agents", "2", "--redis-url", f"redis://127.0.0.1:{port}/0"], 2, tmp,
        change="redis", redis_port=port, after=60, address=two_nodes)
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHANGED redis")]
    rep = json.loads((out / "report.json").read_text())
    assert int(line.split()[-1]) < rep["pages"] - 50, "the crawl did not go on after the restart"
    assert [a["stopped"] for a in rep["agents"]] == ["frontier empty"] * 2, rep["agents"]
    check_against_baseline(one, out, requests, manifest, may_refetch=in_flight_at_faults(proc))


def focus_model(manifest, path: Path):
    """A best-first model whose classifier is a term query for the most frequent topic's name."""
    from raycrawl import text
    from raycrawl.policies.focus import FocusPolicy, TermQuery

    topic = Counter(p["topic"] for p in manifest.pages.values() if p.get("topic") is not None).most_common(1)[0][0]
    word = manifest.meta["topics"][topic]
    policy = FocusPolicy("best-first", 4, TermQuery(text.stems([word], drop_stopwords=False), 1), f"terms:{word}")
    policy.save(path)
    return policy


def check_levels(out: Path, policy, seeds_file: str) -> None:
    """Every URL was fetched from a level it was discovered with: the level its linking page's score
    gives (or its redirect source's level, or the seeds' top level) — whichever agent found it,
    before or after the resume. Some were high, some low: the check can fail."""
    from raycrawl.seeds import read_seeds

    recs = {r.url: r for r in iter_link_records(out)}
    found: dict[str, set[int]] = defaultdict(set)
    for url in read_seeds(seeds_file):
        found[url].add(policy.seed_level)
    for r in recs.values():
        lvl = policy.link_level(r.score) if r.score is not None else 0
        for target in r.links:
            found[target].add(lvl)
        if r.redirect:
            found[r.redirect].add(r.level)
    checked = Counter()
    for url, r in recs.items():
        if r.error in ("dns", "forbidden-network"):  # never queued: recorded by the distributor
            continue
        assert r.level in found[url], (url, r.level, found[url])
        checked[r.level > 0] += 1
    assert checked[True] > 20 and checked[False] > 20, checked


@pytest.mark.slow
def test_two_agent_crawl_resumed_by_one_agent(web_and_baseline, two_nodes) -> None:
    """A focused 2-agent crawl stopped by its page budget, then resumed by a single agent on a local
    Ray without naming the model again: the resume gives every shard and host to agent0
    (apply_shards), keeps the crawl's focus model and every URL's priority level (sent across
    agents, queued in sieves, visit states and virtual queues), and finishes the crawl with no URL
    fetched twice and the one-agent crawl's pages."""
    web, one, config, tmp = web_and_baseline
    out = tmp / "reshard"
    policy = focus_model(web.manifest, tmp / "topic.focus.json")
    web.flush_log()
    n0 = len(web.requests())
    first = crawl_on_cluster([*crawl_args(web, out, config), "--agents", "2", "--max-pages", "80",
                              "--focus", str(tmp / "topic.focus.json")], 2, tmp, address=two_nodes)
    assert first.returncode == 0, first.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["stopped"] == "budget spent" and rep["frontier"]["queued"] > 0
    args = [a for a in crawl_args(web, out, config) if a not in ("--seeds", str(web.seeds_file))]
    second = subprocess.run([sys.executable, "-m", "raycrawl", *args, "--resume"], capture_output=True, text=True,
                            timeout=600, cwd=REPO, env=dict(os.environ, RAY_AUTH_MODE="disabled"))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming with the focus model" in second.stderr
    web.flush_log()
    check_against_baseline(one, out, web.requests()[n0:], web.manifest, may_refetch=set())
    check_levels(out, policy, str(web.seeds_file))
    status = subprocess.run([sys.executable, "-m", "raycrawl", "status", "--out", str(out), "--json"],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert json.loads(status.stdout)["shards"] == {"agent0": 64}
