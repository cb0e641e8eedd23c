"""The Grafana dashboard queries only metrics raycrawl registers, under the names Ray exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from raycrawl.metrics import METRICS, exported_names

ROOT = Path(__file__).resolve().parents[1]
METRIC_NAME = re.compile(r"\bray_[a-z0-9_]+\b")


def _queries() -> list[str]:
    board = json.loads((ROOT / "dashboards" / "raycrawl.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def test_every_query_names_a_registered_metric():
    queries = _queries()
    assert queries
    known = exported_names()
    for q in queries:
        names = METRIC_NAME.findall(q)
        assert names, q
        unknown = set(names) - known
        assert not unknown, f"{q} uses unregistered {unknown}"


def test_every_query_picks_the_crawls_of_the_crawl_variable():
    """Every metric has a crawl label, and each series a panel reads is restricted to ``$crawl``;
    the JSON is what dashboards/generate.py writes."""
    import runpy

    for q in _queries():
        for m in re.finditer(r"ray_raycrawl_[a-z0-9_]+", q):
            assert q[m.end():].startswith('{crawl=~"$crawl"}'), q
    board = json.loads((ROOT / "dashboards" / "raycrawl.json").read_text())
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "crawl"]
    assert board == runpy.run_path(str(ROOT / "dashboards" / "generate.py"))["dashboard"](), "run dashboards/generate.py"


def test_every_registered_metric_is_on_the_dashboard():
    used = {n for q in _queries() for n in METRIC_NAME.findall(q)}
    for name, d in METRICS.items():
        assert used & set(d.exported_names(name)), f"{name} has no panel"


def test_dashboard_uses_datasource_variable_and_provisioning_parses():
    board = json.loads((ROOT / "dashboards" / "raycrawl.json").read_text())
    assert board["templating"]["list"][0]["name"] == "datasource"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
    for f in (ROOT / "dashboards" / "provisioning").glob("*.yaml"):
        assert yaml.safe_load(f.read_text())["apiVersion"] == 1


# Its own Ray instance with a known metrics port, in a process of its own (the session's shared
# local Ray may already run in this process).
EXPORT_SCRIPT = """
import json, sys, time, urllib.request
import ray
from raycrawl.metrics import METRICS, exported_names
port = int(sys.argv[1])
ray.init(address="local", num_cpus=1, include_dashboard=False, _metrics_export_port=port, log_to_driver=False)

@ray.remote
class Recorder:
    def record(self):
        from raycrawl.metrics import bind_crawl, metric
        bind_crawl("c0ffee")
        for name, d in METRICS.items():
            m = metric(name)
            tags = {t: "x" for t in d.tags}
            getattr(m, {"counter": "inc", "gauge": "set", "histogram": "observe"}[d.kind])(1, tags=tags)
        # Ray's counters refuse values <= 0; the exporters must skip them, not raise into a fetch loop
        # (a lookup counted when sent and failed later once made a delta of -1 and killed an agent)
        from raycrawl.metrics import record_batch, record_fetcher
        record_fetcher("a", -1, 0, -0.5)
        record_batch("a", {"status:200": 0, "error:dns": -1}, [])

ray.get(Recorder.remote().record.remote())
wanted, seen, deadline = exported_names(), set(), time.time() + 60
while time.time() < deadline and not wanted <= seen:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        seen = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                if line.startswith("ray_raycrawl") and 'crawl="c0ffee"' in line}
    except OSError:
        pass
    time.sleep(1)
ray.shutdown()
print(json.dumps(sorted(seen)))
"""


@pytest.mark.slow
def test_ray_exports_the_names_the_dashboard_queries(tmp_path):
    """Real Ray: record every metric once in an actor and scrape the node's metrics port; every
    series carries the crawl label bound in that process."""
    import os
    import subprocess
    import sys

    from raycrawl.redis_server import free_port

    proc = subprocess.run([sys.executable, "-c", EXPORT_SCRIPT, str(free_port())], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled",
                                                      "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    wanted = exported_names()
    assert wanted <= seen, f"not exported: {sorted(wanted - seen)}"


def test_actors_read_well_in_the_ray_dashboard(ray_local, redis_url, tmp_path):
    """Class names without ``actor_class.<locals>.`` and a repr naming the agent (Ray shows both in
    its dashboard and prefixes the worker logs with the repr)."""
    import ray

    from raycrawl.actors.cluster import agent_actor, crew_worker
    from raycrawl.actors.fetch import fetch_loop

    names = [m.actor_class().__ray_metadata__.class_name for m in (agent_actor, fetch_loop, crew_worker)]
    assert names == ["AgentActor", "FetchActor", "CrewWorker"]
    from raycrawl.settings import Settings

    actor = crew_worker.actor_class().options(name="raycrawl-worker-rc:agent7").remote(
        str(tmp_path), redis_url, "agent7", Settings(out=str(tmp_path)))
    try:
        assert ray.get(actor.__ray_call__.remote(repr)) == "CrewWorker(raycrawl-worker-rc:agent7)"
        table = ray._private.state.actors()  # the GCS's actor table, as the dashboard lists it
        assert {a["ActorClassName"] for a in table.values() if a["Name"] == "raycrawl-worker-rc:agent7"} == {"CrewWorker"}
    finally:
        ray.kill(actor)
