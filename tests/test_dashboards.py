"""The Grafana dashboard queries only metrics raycrawl registers, under the names Ray exports."""

from __future__ import annotations

import json
import re
import time
import urllib.request
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


@pytest.mark.slow
def test_ray_exports_the_names_the_dashboard_queries(tmp_path):
    """Real Ray: record every metric once in an actor and scrape the node's metrics port."""
    import ray

    from raycrawl.redis_server import free_port

    port = free_port()
    ray.init(address="local", num_cpus=1, include_dashboard=False, _metrics_export_port=port, log_to_driver=False)
    try:

        @ray.remote
        class Recorder:
            def record(self) -> None:
                from raycrawl.metrics import metric

                for name, d in METRICS.items():
                    m = metric(name)
                    tags = {t: "x" for t in d.tags}
                    getattr(m, {"counter": "inc", "gauge": "set", "histogram": "observe"}[d.kind])(1, tags=tags)

        rec = Recorder.remote()
        ray.get(rec.record.remote())
        wanted = exported_names()
        deadline = time.time() + 60
        seen: set[str] = set()
        while time.time() < deadline and not wanted <= seen:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                seen = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line.startswith("ray_raycrawl")}
            except OSError:
                pass
            time.sleep(1)
        assert wanted <= seen, f"not exported: {sorted(wanted - seen)}"
    finally:
        ray.shutdown()
