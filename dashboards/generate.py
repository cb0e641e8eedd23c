"""Writes dashboards/raycrawl.json (Grafana) from the panel list below: `python dashboards/generate.py`.

Queries use only metric names defined in core/metrics.py (tests/test_dashboards.py checks it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

PANELS = [
    ("Pages/s by status", "sum by (status) (rate(ray_raycrawl_pages_fetched_total[1m]))", "reqps"),
    ("Bytes/s", "sum(rate(ray_raycrawl_bytes_fetched_total[1m]))", "Bps"),
    ("Fetch errors/s by kind", "sum by (kind) (rate(ray_raycrawl_fetch_errors_total[1m]))", "reqps"),
    (
        "Fetch latency p50 / p95",
        [
            "histogram_quantile(0.5, sum by (le) (rate(ray_raycrawl_fetch_latency_seconds_bucket[5m])))",
            "histogram_quantile(0.95, sum by (le) (rate(ray_raycrawl_fetch_latency_seconds_bucket[5m])))",
        ],
        "s",
    ),
    ("Front size (hosts in the workbench)", "sum(ray_raycrawl_front_size)", "short"),
    ("Todo / ready hosts", ["sum(ray_raycrawl_todo_queue_size)", "sum(ray_raycrawl_ready_queue_size)"], "short"),
    ("Sieve size (distinct URLs)", "sum(ray_raycrawl_sieve_size)", "short"),
    ("DNS lookups/s by outcome", "sum by (outcome) (rate(ray_raycrawl_dns_lookups_total[1m]))", "reqps"),
    ("Fetch slots idle on politeness (s/s)", "sum by (kind) (rate(ray_raycrawl_politeness_wait_seconds_total[1m]))", "short"),
    ("robots.txt denials/s", "sum(rate(ray_raycrawl_robots_denied_total[1m]))", "reqps"),
    ("Duplicates/s by kind", "sum by (kind) (rate(ray_raycrawl_duplicates_total[1m]))", "reqps"),
    ("Pages/s per agent", "sum by (agent) (ray_raycrawl_agent_pages_per_second)", "reqps"),
    ("Host shards per agent (membership)", "max by (agent) (ray_raycrawl_agent_shards)", "short"),
    ("Agents joining / leaving", "sum by (change) (increase(ray_raycrawl_membership_changes_total[5m]))", "short"),
]


CRAWL = 'crawl=~"$crawl"'  # every metric carries the crawl's id (core/metrics.py, bind_crawl)


def select_crawl(expr: str) -> str:
    """Each ``ray_raycrawl_…`` series of ``expr`` restricted to the crawls picked in ``$crawl``."""
    return re.sub(r"\b(ray_raycrawl_[a-z0-9_]+)\b", r"\1{" + CRAWL + "}", expr)


def dashboard() -> dict:
    panels = []
    for i, (title, exprs, unit) in enumerate(PANELS):
        exprs = [select_crawl(e) for e in ([exprs] if isinstance(exprs, str) else exprs)]
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(65 + j), "expr": e, "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                    for j, e in enumerate(exprs)
                ],
            }
        )
    return {
        "title": "raycrawl",
        "uid": "raycrawl-main",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "tags": ["raycrawl", "ray"],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "crawl",
                    "label": "Crawl",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": "label_values(ray_raycrawl_pages_fetched_total, crawl)", "refId": "crawls"},
                    "definition": "label_values(ray_raycrawl_pages_fetched_total, crawl)",
                    "refresh": 2,
                    "includeAll": True,
                    "allValue": ".*",
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                    "hide": 0,
                },
            ]
        },
        "panels": panels,
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("raycrawl.json")
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(out)
