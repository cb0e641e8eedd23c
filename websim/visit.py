"""A short scripted visit of the in-vitro web: the demo's stand-in for a crawler, and the tests'
known-good (or deliberately rude) client for the audit.

It walks the manifest's link graph breadth-first from the seeds (no HTML parsing: this is a
probe, not a crawler), one request at a time. When ``polite`` it fetches each host's robots.txt
first, skips URLs the manifest disallows, and schedules the next request to a host (IP) no
earlier than ``delay`` after the END of the previous response from it — BUbiNG's rule.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

import aiohttp

from raycrawl.websim.client import HostsResolver
from raycrawl.websim.manifest import Manifest


@dataclass
class VisitResult:
    fetched: list[tuple[str, int, int]] = field(default_factory=list)  # (url, status, body bytes)
    errors: int = 0
    seconds: float = 0.0


async def scripted_visit(manifest: Manifest, hosts_file, max_pages: int = 40, host_delay: float = 0.2,
                         ip_delay: float = 0.05, polite: bool = True, timeout: float = 5.0,
                         per_host: int = 1_000_000) -> VisitResult:
    """Fetch up to ``max_pages`` pages (at most ``per_host`` per host, plus robots.txt files when
    polite) of plain hosts."""
    ok_hosts = {h for h, rec in manifest.hosts.items() if rec["role"] == "plain" and rec["robots"] != "error_5xx"}
    order: list[str] = []
    taken: dict[str, int] = {}
    seen: set[str] = set()
    queue = deque(u for u in manifest.seeds if manifest.host_name(u) in ok_hosts)
    while queue and len(order) < max_pages:
        u = queue.popleft()
        if u in seen:
            continue
        seen.add(u)
        rec = manifest.pages.get(u)
        if rec is None or rec["kind"] != "html" or manifest.host_name(u) not in ok_hosts:
            continue
        if polite and not manifest.allowed(u):
            continue
        queue.extend(rec["links"])
        if taken.get(manifest.host_name(u), 0) >= per_host:
            continue
        taken[manifest.host_name(u)] = taken.get(manifest.host_name(u), 0) + 1
        order.append(u)
    queues: dict[str, deque[str]] = {}
    for u in order:
        queues.setdefault(manifest.host_name(u), deque()).append(u)
    if polite:
        for h, q in queues.items():
            q.appendleft(f"http://{h}:{manifest.port}/robots.txt")
    host_ready = dict.fromkeys(queues, 0.0)
    ip_ready: dict[str, float] = {}
    result = VisitResult()
    t0 = time.monotonic()
    connector = aiohttp.TCPConnector(resolver=HostsResolver(hosts_file), limit=1)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        while queues:
            def ready_at(h: str) -> float:
                return max(host_ready[h], ip_ready.get(manifest.hosts[h]["ip"], 0.0))

            host = min(queues, key=ready_at) if polite else next(iter(queues))
            if polite:
                wait = ready_at(host) - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            url = queues[host].popleft()
            if not queues[host]:
                del queues[host]
            try:
                async with s.get(url, allow_redirects=False) as r:
                    body = await r.read()
                    result.fetched.append((url, r.status, len(body)))
            except (TimeoutError, aiohttp.ClientError):
                result.errors += 1
            done = time.monotonic()
            # Next request no earlier than the delay after the END of this response.
            host_ready[host] = done + max(host_delay, manifest.crawl_delay(host))
            ip_ready[manifest.hosts[host]["ip"]] = done + ip_delay
    result.seconds = time.monotonic() - t0
    return result
