"""Every metric raycrawl exports, defined in one place (names, kinds, tags, help).

Actors create them with :func:`metric` (``ray.util.metrics`` objects, exported on each node's
metrics port), each labelled with the crawl (:func:`bind_crawl`) besides its own tags; Ray prefixes ``ray_`` and adds ``_total`` to counters and
``_bucket/_sum/_count`` to histograms. ``dashboards/raycrawl.json`` queries exactly these
names (a test keeps the two in step). Outside a Ray worker the metric objects are no-ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class MetricDef:
    kind: str  # "counter" | "gauge" | "histogram"
    description: str
    tags: tuple[str, ...] = ("agent",)  # every metric also carries "crawl" (see bind_crawl)
    boundaries: tuple[float, ...] = ()

    def exported_names(self, name: str) -> tuple[str, ...]:
        base = f"ray_{name}"
        if self.kind == "counter":
            return (f"{base}_total",)
        if self.kind == "histogram":
            return (f"{base}_bucket", f"{base}_sum", f"{base}_count")
        return (base,)


METRICS: dict[str, MetricDef] = {
    "raycrawl_pages_fetched": MetricDef("counter", "Responses received, by HTTP status class", ("agent", "status")),
    "raycrawl_bytes_fetched": MetricDef("counter", "Body bytes received, by HTTP status class", ("agent", "status")),
    "raycrawl_fetch_errors": MetricDef("counter", "Fetches that got no usable response, by error kind", ("agent", "kind")),
    "raycrawl_fetch_latency_seconds": MetricDef(
        "histogram", "Request start to end of response", ("agent",), (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
    ),
    "raycrawl_front_size": MetricDef("gauge", "Hosts in the workbench (BUbiNG's front)"),
    "raycrawl_todo_queue_size": MetricDef("gauge", "URLs queued in the workbench's visit states (Redis)"),
    "raycrawl_ready_queue_size": MetricDef("gauge", "Workbench entries (IPs with queued hosts) waiting on their next-fetch time"),
    "raycrawl_sieve_size": MetricDef("gauge", "Distinct URLs the sieve has seen"),
    "raycrawl_dns_lookups": MetricDef("counter", "DNS lookups sent (cache misses), by outcome (ok, failed)", ("agent", "outcome")),
    "raycrawl_politeness_wait_seconds": MetricDef(
        "counter", "Seconds fetch actors had free slots while every queued host waited on its host/IP delay "
        "(kind fetcher_idle)", ("agent", "kind")),
    "raycrawl_robots_denied": MetricDef("counter", "URLs not fetched because robots.txt disallows them"),
    "raycrawl_duplicates": MetricDef("counter", "Pages recognised as duplicates, by kind (exact, near)", ("agent", "kind")),
    "raycrawl_agent_pages_per_second": MetricDef("gauge", "Pages per second of one agent over the last interval"),
    "raycrawl_agent_shards": MetricDef("gauge", "Host shards an agent owns (0 once it left)"),
    "raycrawl_membership_changes": MetricDef("counter", "Agents joining or leaving a running crawl", ("agent", "change")),
}


class _NoOp:
    def inc(self, *a: Any, **k: Any) -> None: ...
    def set(self, *a: Any, **k: Any) -> None: ...
    def observe(self, *a: Any, **k: Any) -> None: ...
    def set_default_tags(self, *a: Any, **k: Any) -> None: ...


_crawl = "-"


def bind_crawl(crawl_id: str | None) -> None:
    """Label every metric this process records with the crawl (its id, ``OUT/crawl-id``): several
    crawls, or the passes of one directory, can then share a Prometheus and a dashboard."""
    global _crawl
    _crawl = crawl_id or "-"


def tag_keys(d: MetricDef) -> tuple[str, ...]:
    return ("crawl", *d.tags)


def metric(name: str) -> Any:
    """The process-wide metric object for ``name`` (which must be defined in :data:`METRICS`),
    labelled with the bound crawl."""
    m = _make(name)
    m.set_default_tags({"crawl": _crawl})
    return m


@cache
def _make(name: str) -> Any:
    d = METRICS[name]
    try:
        import ray
        from ray.util import metrics as rm

        if not ray.is_initialized():
            return _NoOp()
        if d.kind == "counter":
            return rm.Counter(name, description=d.description, tag_keys=tag_keys(d))
        if d.kind == "gauge":
            return rm.Gauge(name, description=d.description, tag_keys=tag_keys(d))
        return rm.Histogram(name, description=d.description, boundaries=list(d.boundaries), tag_keys=tag_keys(d))
    except Exception:  # noqa: BLE001 - metrics must never break a crawl
        return _NoOp()


def exported_names() -> set[str]:
    return {n for name, d in METRICS.items() for n in d.exported_names(name)}


def _status_class(status: str) -> str:
    return "none" if status in ("0", "") else f"{status[0]}xx"


def record_batch(agent: str, counters: dict[str, int], latencies: list[float]) -> None:
    """Export one committed batch of the agent's counters (the keys ``report.json`` is built from:
    ``status:200``, ``error:timeout``, ``dup:near``, ``bytes``, ``filtered:robots``…)."""
    tags = {"agent": agent}
    for key, n in counters.items():
        if n <= 0:  # Ray's counters only go up (and refuse 0)
            continue
        kind, _, value = key.partition(":")
        if kind == "status":
            metric("raycrawl_pages_fetched").inc(n, tags={**tags, "status": _status_class(value)})
        elif kind == "error":
            metric("raycrawl_fetch_errors").inc(n, tags={**tags, "kind": value})
            if value.startswith("robots"):
                metric("raycrawl_robots_denied").inc(n, tags=tags)
        elif kind == "dup":
            metric("raycrawl_duplicates").inc(n, tags={**tags, "kind": value})
    if counters.get("bytes", 0) > 0:
        metric("raycrawl_bytes_fetched").inc(counters["bytes"], tags={**tags, "status": "all"})
    hist = metric("raycrawl_fetch_latency_seconds")
    for seconds in latencies:
        hist.observe(max(0.0, seconds), tags=tags)


def record_frontier(agent: str, counts: dict[str, int], pages_per_second: float, sieve_size: int | None = None) -> None:
    """Export the frontier gauges (``counts`` as ``RedisFrontier.counts()`` returns them)."""
    tags = {"agent": agent}
    metric("raycrawl_front_size").set(counts.get("front", 0), tags=tags)
    metric("raycrawl_todo_queue_size").set(counts.get("queued", 0), tags=tags)
    metric("raycrawl_ready_queue_size").set(counts.get("ips_waiting", 0), tags=tags)
    metric("raycrawl_agent_pages_per_second").set(pages_per_second, tags=tags)
    if sieve_size is not None:
        metric("raycrawl_sieve_size").set(sieve_size, tags=tags)


def record_fetcher(agent: str, dns_ok: int, dns_failed: int, idle_seconds: float) -> None:
    """Export a fetch actor's DNS lookups (cache misses) and its seconds idle on politeness since
    its last export."""
    tags = {"agent": agent}
    if dns_ok > 0:
        metric("raycrawl_dns_lookups").inc(dns_ok, tags={**tags, "outcome": "ok"})
    if dns_failed > 0:
        metric("raycrawl_dns_lookups").inc(dns_failed, tags={**tags, "outcome": "failed"})
    if idle_seconds > 0:
        metric("raycrawl_politeness_wait_seconds").inc(idle_seconds, tags={**tags, "kind": "fetcher_idle"})
