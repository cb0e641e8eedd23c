"""The audit: does a request log show a polite, robots-abiding, non-repeating crawl?

Politeness (BUbiNG's rule): a delay is measured from the END of the previous response from a
host (or IP) to the START of the next request to it. A host is a host NAME: its requests over
http and https (websim's ``--https`` hosts, on a second port) count together, as its webmaster
counts them. For a host the required delay is
``max(host_delay, Crawl-delay of the host for raycrawl)``; for an IP it is ``ip_delay`` (the IP is
the local address of the server socket, i.e. the address the client dialed). Requests that
overlap in time count as violations too. robots.txt fetches are requests like any other.

A gap shorter than the requirement by more than ``tolerance`` (default 2 ms: the server stamps
``start`` after parsing headers and ``end`` after handing the last byte to the kernel, both with
event-loop jitter) is a violation.

Robots: fetching a URL the host's rules disallow for ``raycrawl`` (with a 5xx robots.txt every
URL but ``/robots.txt`` is disallowed); and ``robots-first``: fetching a page of an origin (scheme,
host, port) before any request for that origin's own ``/robots.txt`` ended, RFC 9309 being per
origin — checked for hosts whose robots.txt this log shows fetched at all (a later pass of a
crawl may rightly use rules fetched before the log began). Duplicates: fetching a canonical URL again after a
fetch of it got an answer below 500 (retries after 5xx, resets and hangs are allowed;
robots.txt re-fetches are counted apart, not as violations; a robots.txt redirected to another
authority, ``/robots-for/HOST.txt``, counts as a robots.txt fetch of the host serving it). Unlinked:
a request for a URL that is no page of the web and no trap's URL space — what a crawler asks for
when it reads a link, a refresh or a ``Location`` otherwise than a browser does.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from raycrawl.urls import canonicalize, split_host
from raycrawl.websim.manifest import Manifest
from raycrawl.websim.render import SITEMAP_PATH
from raycrawl.websim.request_log import LoggedRequest

ROBOTS_PATHS = ("/robots.txt", "/robots-moved.txt")
KINDS = ("host", "ip", "robots", "robots-first", "duplicate", "unlinked")


def is_robots_path(path: str) -> bool:
    """A robots.txt fetch's request: ``/robots.txt``, or a redirect it was sent (``/robots-moved.txt``,
    or ``/robots-for/HOST.txt`` on another authority)."""
    return path in ROBOTS_PATHS or path.startswith("/robots-for/")


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str      # host | ip | robots | robots-first | duplicate | unlinked
    key: str       # host, IP or URL
    detail: str
    start: float


@dataclass
class AuditReport:
    requests: int = 0
    hosts: int = 0
    ips: int = 0
    foreign: int = 0              # requests for hosts not in the manifest
    robots_fetches: int = 0
    robots_refetches: int = 0
    min_host_slack: float | None = None  # smallest (gap - required) seen per host pair, seconds
    min_ip_slack: float | None = None
    violations: list[Violation] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for v in self.violations if v.kind == kind)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict:
        """Counts and the violations, for machines (``raycrawl websim audit --json``)."""
        return {"requests": self.requests, "hosts": self.hosts, "ips": self.ips, "foreign": self.foreign,
                "robots_fetches": self.robots_fetches, "robots_refetches": self.robots_refetches,
                "min_host_slack": self.min_host_slack, "min_ip_slack": self.min_ip_slack,
                "violations": {k: self.count(k) for k in KINDS}, "ok": self.ok,
                "list": [{"kind": v.kind, "key": v.key, "detail": v.detail, "start": v.start} for v in self.violations]}

    def summary(self, show: int = 10) -> str:
        def fmt(x):
            return ("n/a" if x is None else f"{x * 1000:.1f} ms")
        lines = [
            f"requests            {self.requests}  (hosts {self.hosts}, IPs {self.ips}, foreign {self.foreign})",
            f"robots.txt fetches  {self.robots_fetches}  (re-fetches {self.robots_refetches})",
            f"host politeness     {self.count('host')} violations  (min slack {fmt(self.min_host_slack)})",
            f"IP politeness       {self.count('ip')} violations  (min slack {fmt(self.min_ip_slack)})",
            f"robots violations   {self.count('robots')}  (pages before their origin's robots.txt: "
            f"{self.count('robots-first')})",
            f"duplicate fetches   {self.count('duplicate')}",
            f"unlinked URLs       {self.count('unlinked')}  (requests no browser would make from the pages)",
            "verdict             " + ("OK" if self.ok else "VIOLATIONS"),
        ]
        lines += [f"  {v.kind:9} {v.key}  {v.detail}" for v in self.violations[:show]]
        if len(self.violations) > show:
            lines.append(f"  ... and {len(self.violations) - show} more")
        return "\n".join(lines)


def _check_gaps(groups: dict[str, list[LoggedRequest]], kind: str, required_of, tolerance: float,
                report: AuditReport) -> float | None:
    min_slack: float | None = None
    for key, reqs in groups.items():
        reqs.sort(key=lambda r: r.start)
        required = required_of(key)
        last_end = None
        for r in reqs:
            if last_end is not None:
                slack = (r.start - last_end) - required
                min_slack = slack if min_slack is None else min(min_slack, slack)
                if slack < -tolerance:
                    report.violations.append(Violation(
                        kind, key, f"gap {(r.start - last_end) * 1000:.1f} ms < {required * 1000:.0f} ms before {r.target}",
                        r.start))
            last_end = r.end if last_end is None else max(last_end, r.end)
    return min_slack


def request_url(r: LoggedRequest, manifest: Manifest) -> str | None:
    """The canonical URL a logged request asked for (None when it does not canonicalize)."""
    return canonicalize(f"{manifest.scheme_of(r.host)}://{r.host}{r.target if r.target.startswith('/') else '/' + r.target}")


def audit(records: list[LoggedRequest], manifest: Manifest, host_delay: float, ip_delay: float,
          tolerance: float = 0.002) -> AuditReport:
    """Check ``records`` (a request log) against ``manifest``."""
    assert host_delay >= 0 and ip_delay >= 0 and tolerance >= 0
    report = AuditReport(requests=len(records))
    by_host: dict[str, list[LoggedRequest]] = defaultdict(list)
    by_ip: dict[str, list[LoggedRequest]] = defaultdict(list)
    answered: set[str] = set()
    robots_seen: set[str] = set()
    robots_ends: dict[str, float] = {}  # origin → end of its first /robots.txt request
    pages: list[tuple[str, str, LoggedRequest]] = []  # (name, origin, request) of page requests
    for r in sorted(records, key=lambda r: r.start):
        name = manifest.host_name(r.host) if r.host != "-" else ""
        if name not in manifest.hosts:
            report.foreign += 1
            continue
        by_host[name].append(r)
        by_ip[r.ip].append(r)
        url = request_url(r, manifest)
        if url is None:
            continue
        origin, path = split_host(url)
        if is_robots_path(path):
            report.robots_fetches += 1
            if url in robots_seen:
                report.robots_refetches += 1
            robots_seen.add(url)
            if path == "/robots.txt":
                robots_ends[origin] = min(robots_ends.get(origin, r.end), r.end)
            continue
        pages.append((name, origin, r))
        if not manifest.allowed(url):
            report.violations.append(Violation("robots", url, "disallowed for raycrawl", r.start))
        if url not in manifest.pages and not manifest.hosts[name].get("trap") and path != SITEMAP_PATH:
            # not a page of the web, nor a trap's infinite space: a link or redirect misread
            report.violations.append(Violation("unlinked", url, "no page links or redirects to it", r.start))
        if url in answered:
            report.violations.append(Violation("duplicate", url, "fetched again after an answer", r.start))
        if 0 < r.status < 500:
            answered.add(url)
    with_robots = {manifest.host_name(o) for o in robots_ends}
    for name, origin, r in pages:
        if name in with_robots and not robots_ends.get(origin, float("inf")) <= r.start:
            report.violations.append(Violation("robots-first", origin + r.target,
                                               f"before {origin}/robots.txt was fetched", r.start))
    report.hosts, report.ips = len(by_host), len(by_ip)
    report.min_host_slack = _check_gaps(
        by_host, "host", lambda h: max(host_delay, manifest.crawl_delay(h)), tolerance, report)
    report.min_ip_slack = _check_gaps(by_ip, "ip", lambda _: ip_delay, tolerance, report)
    report.violations.sort(key=lambda v: v.start)
    return report
