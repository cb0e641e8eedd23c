"""The ground-truth manifest of one served web: what every URL is, links to, and is labelled.

File: ``manifest.jsonl.gz`` — gzip'd JSON lines, each an object with a ``type`` field:

* ``meta`` (first line): hosts, ips, seed, epoch, port, pages_per_host_mean, seeds (URLs),
  user_agent, topics (names), popular_terms, nxdomain_hosts, dead_ip, dns ([ip, port]),
  tls_port (0: no https), https_hosts (the hosts also served with https on tls_port).
* ``host``: host, ip, role, topic, robots (kind), rules (for ``raycrawl``: list of
  [allow|disallow, pattern], disallow_all, crawl_delay), crawl_delay, spam, fault, trap
  ({kind, entry, pattern, param} or null), mirror_of, farm, pages.
* ``page``: url (canonical, per :func:`raycrawl.urls.canonicalize`), host, kind (html, pdf,
  png, binary, redirect, error, reset, oversized, bomb), status (expected; 0 = connection
  reset), ctype, topic, links (canonical out-link URLs, unique, document order), allowed
  (robots verdict for ``raycrawl``), labels, location (redirects), cluster (duplicate cluster
  id or null), changed (epochs in which the page changed), removed_in, change_p (its chance of
  changing per epoch, see websim.model), canonical (its
  ``<link rel=canonical>`` URL or null), embeds (page requisites: the URLs of the stylesheets,
  scripts, images and fonts a browser fetches to show it, a stylesheet's ``@import``s and
  ``url()``s; in a ``requisites`` web only — kinds css, js, font, png).
* ``cluster``: id, kind (``exact``: same visible text; ``near``: mirror with small edits;
  ``near_miss``: heavier edits — *not* duplicates), urls (first is the original), jaccard
  (4-word-shingle Jaccard of each url with the first, on ``raycrawl.text.tokens(visible_text)``).

Session-id hosts write ``?sid=…`` on their links; the manifest gives those links without it.
A host served on both schemes has every page twice, under its http and its https URL (the same
record, the same bytes); about half the links to it are https ones (``Renderer.link_url``).
Trap pages (calendars, repeated segments) are infinite and appear only as their host's ``trap``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from raycrawl.urls import canonicalize, host_of, split_host
from raycrawl.websim.model import CALENDAR_ENTRY, DEAD_IP, WebModel, repeat_segment
from raycrawl.websim.render import Renderer, jaccard, shingles
from raycrawl.websim.robots import USER_AGENT, Rules, allowed

_CTYPE = {"html": "text/html", "pdf": "application/pdf", "png": "image/png", "binary": "text/html",
          "redirect": "text/html", "error": "text/html", "oversized": "text/html", "bomb": "text/html",
          "css": "text/css", "js": "text/javascript", "font": "font/woff", "json": "application/json",
          "real": "text/html"}


def trap_info(model: WebModel, host_name: str) -> dict | None:
    """Where a trap host's infinite URL space starts and what it looks like."""
    host = model.by_name[host_name]
    match host.trap:
        case "calendar":
            return {"kind": "calendar", "entry": CALENDAR_ENTRY, "pattern": r"^/calendar/\d{4}/\d{2}/$",
                    "param": None}
        case "repeat":
            seg = repeat_segment(model, host)
            return {"kind": "repeat", "entry": f"/{seg}", "pattern": f"^/({re.escape(seg)})+$", "param": None}
        case "session":
            return {"kind": "session", "entry": None, "pattern": r"[?&]sid=", "param": "sid"}
    return None


def _embeds(model: WebModel, page) -> list[tuple[str, str]]:  # noqa: ANN001 - a model Page
    """A page's requisites as served: a byte-for-byte copy serves its source's markup."""
    while "same_bytes" in page.labels and page.copy_of:
        page = model.by_name[page.copy_of[0]].pages[page.copy_of[1]]
    return page.embeds


def build_records(model: WebModel, renderer: Renderer, dns: tuple[str, int] | None = None) -> list[dict]:
    """All manifest records for ``model`` served on ``renderer.port``."""
    url = renderer.url
    records: list[dict] = [{
        "type": "meta", "hosts": model.n_hosts, "ips": model.n_ips, "seed": model.seed, "epoch": model.epoch,
        "port": renderer.port, "pages_per_host_mean": model.pages_per_host_mean, "clean": model.clean,
        "change_rates": model.change_rates, "requisites": model.requisites, "scripts": model.scripts,
        "seeds": [url(h, p) for h, p in model.seeds()], "user_agent": USER_AGENT,
        "topics": [model.vocab.topic_name(t) for t in range(model.vocab.topics)],
        "popular_terms": list(model.vocab.popular_terms), "nxdomain_hosts": model.nxdomain_hosts,
        "dead_ip": DEAD_IP, "dns": list(dns) if dns else None,
        "tls_port": renderer.tls_port, "https_hosts": sorted(renderer.both),
    }]
    clusters: list[dict] = []
    cluster_of: dict[str, int] = {}
    exact: dict[str, list[str]] = {}
    for host in model.hosts:
        for page in host.pages.values():
            if page.copy_of:
                root = page.copy_of
                while (src := model.by_name[root[0]].pages[root[1]]).copy_of:
                    root = src.copy_of
                exact.setdefault(url(*root), []).append(url(host.name, page.path))
    for root, copies in exact.items():
        cid = len(clusters)
        members = [root, *copies]
        clusters.append({"type": "cluster", "id": cid, "kind": "exact", "urls": members,
                         "jaccard": [1.0] * len(members)})
        for u in members:
            cluster_of[u] = cid
    for host in model.hosts:
        for page in host.pages.values():
            if page.edit_of:
                src_host = model.by_name[page.edit_of[0]]
                a = shingles(renderer.words(src_host, src_host.pages[page.edit_of[1]]))
                b = shingles(renderer.words(host, page))
                cid = len(clusters)
                kind = "near" if host.role == "mirror" else "near_miss"
                members = [url(*page.edit_of), url(host.name, page.path)]
                clusters.append({"type": "cluster", "id": cid, "kind": kind, "urls": members,
                                 "jaccard": [1.0, round(jaccard(a, b), 4)]})
                if kind == "near":
                    cluster_of.setdefault(members[0], cid)
                    cluster_of[members[1]] = cid
    for host in model.hosts:
        rules = host.rules
        records.append({
            "type": "host", "host": host.name, "ip": host.ip, "role": host.role, "topic": host.topic,
            "robots": host.robots, "rules": rules.to_json(), "crawl_delay": rules.crawl_delay,
            "spam": host.spam, "fault": host.fault, "trap": trap_info(model, host.name),
            "mirror_of": host.mirror_of, "farm": host.farm, "pages": len(host.pages),
        })
    for host in model.hosts:
        rules = host.rules
        for page in host.pages.values():
            u = url(host.name, page.path)
            status = 404 if page.removed_in is not None else page.status
            records.append({
                "type": "page", "url": u, "host": host.name, "kind": page.kind, "status": status,
                "ctype": _CTYPE.get(page.kind), "topic": page.topic,
                "links": list(dict.fromkeys(renderer.link_url(host.name, page.path, h, p) for h, p in page.links)),
                "allowed": allowed(rules, page.path), "labels": page.labels,
                "location": url(*page.location) if page.location else None, "cluster": cluster_of.get(u),
                "changed": page.changed, "removed_in": page.removed_in, "change_p": page.change_p,
                "canonical": renderer.canonical(host, page) if page.kind == "html" else None,
                "embeds": [url(h, p) for h, p in _embeds(model, page)],
            })
    # (a twin is byte-identical to its http page, but no duplicate cluster lists it)
    twins = [{**rec, "url": renderer.https_url(rec["host"], split_host(rec["url"])[1]), "cluster": None}
             for rec in records if rec["type"] == "page" and rec["host"] in renderer.both]
    records.extend(twins)
    records.extend(clusters)
    return records


def write_manifest(records: list[dict], path: str | Path) -> Path:
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as f:
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return path


@dataclass
class Manifest:
    """The loaded ground truth. ``pages`` maps canonical URL -> page record; ``hosts`` maps host
    name -> host record (see the module docstring for the fields)."""

    meta: dict
    hosts: dict[str, dict] = field(default_factory=dict)
    pages: dict[str, dict] = field(default_factory=dict)
    clusters: list[dict] = field(default_factory=list)
    _rules: dict[str, Rules] = field(default_factory=dict, repr=False)

    @property
    def port(self) -> int:
        return self.meta["port"]

    @property
    def seeds(self) -> list[str]:
        return self.meta["seeds"]

    @property
    def tls_port(self) -> int:
        """The port the https hosts answer https on (0: none; manifests of older websims lack it)."""
        return self.meta.get("tls_port", 0)

    def scheme_of(self, host_header: str) -> str:
        """The scheme a request of the request log came in with (by the port its Host names)."""
        return "https" if self.tls_port and host_header.endswith(f":{self.tls_port}") else "http"

    def host_name(self, url_or_netloc: str) -> str:
        """Host name (no port) of a URL or a Host header value."""
        netloc = host_of(url_or_netloc) if "://" in url_or_netloc else url_or_netloc
        return netloc.rsplit(":", 1)[0].lower().rstrip(".") if not netloc.startswith("[") else netloc

    def rules(self, host: str) -> Rules | None:
        """The robots rules binding ``raycrawl`` on ``host`` (None for hosts outside the web)."""
        if host not in self._rules:
            rec = self.hosts.get(host)
            if rec is None:
                return None
            self._rules[host] = Rules.from_json(rec["rules"])
        return self._rules[host]

    def crawl_delay(self, host: str) -> float:
        rules = self.rules(host)
        return (rules.crawl_delay or 0.0) if rules else 0.0

    def allowed(self, url: str) -> bool:
        """Robots verdict for any canonical URL of the web (traps included)."""
        rules = self.rules(self.host_name(url))
        return True if rules is None else allowed(rules, split_host(url)[1])

    def html_pages(self) -> list[dict]:
        return [p for p in self.pages.values() if p["kind"] == "html" and p["status"] == 200]

    def reachable(self, obey_robots: bool = True, seeds: list[str] | None = None,
                  skip: Callable[[str], bool] | None = None) -> set[str]:
        """Manifest URLs reachable from the seeds by following links (and redirects), skipping
        disallowed URLs when ``obey_robots`` and the URLs ``skip`` says (an operator's blocks);
        unreachable hosts' pages are reached but not expanded."""
        start = [u for u in (seeds or self.seeds) if u in self.pages]
        seen: set[str] = set()
        queue = deque(start)
        while queue:
            u = queue.popleft()
            if u in seen or (obey_robots and not self.allowed(u)) or (skip is not None and skip(u)):
                continue
            seen.add(u)
            rec = self.pages[u]
            host = self.hosts.get(rec["host"], {})
            if host.get("fault") in ("hang", "dead"):
                continue
            nxt = list(rec["links"]) + ([rec["location"]] if rec["location"] else []) + list(rec.get("embeds") or ())
            queue.extend(v for v in nxt if v in self.pages and v not in seen)
        return seen


def manifest_stats(m: Manifest) -> str:
    """A human summary of a manifest: sizes, roles, robots kinds, page kinds, clusters, reachability."""
    from collections import Counter

    def line(title: str, counter: Counter) -> str:
        return f"{title:18}" + ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0]))))

    meta = m.meta
    html = m.html_pages()
    links = sum(len(p["links"]) for p in m.pages.values())
    reach_all, reach_polite = m.reachable(obey_robots=False), m.reachable(obey_robots=True)
    return "\n".join([
        f"web               seed {meta['seed']}, epoch {meta['epoch']}, port {meta['port']}, "
        f"{len(m.hosts)} hosts on {meta['ips']} IPs, {len(meta['seeds'])} seeds",
        f"URLs              {len(m.pages)} ({len(html)} HTML pages answering 200), {links} links",
        f"reachable         {len(reach_all)} from the seeds, {len(reach_polite)} obeying robots.txt",
        line("host roles", Counter(h["role"] for h in m.hosts.values())),
        line("robots.txt", Counter(h["robots"] for h in m.hosts.values())),
        line("Crawl-delay", Counter(h["crawl_delay"] for h in m.hosts.values() if h["crawl_delay"])),
        line("page kinds", Counter(p["kind"] for p in m.pages.values())),
        line("clusters", Counter(c["kind"] for c in m.clusters)),
        line("changed", Counter(e for p in m.pages.values() for e in p["changed"])) if meta["epoch"] else
        "changed           (epoch 0)",
    ])


def load_manifest(path: str | Path) -> Manifest:
    """Read a manifest written by :func:`write_manifest`. Raises ValueError on a foreign file."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.jsonl.gz"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            first = json.loads(f.readline())
            if first.get("type") != "meta":
                raise ValueError(f"{path}: not a websim manifest (no meta line)")
            m = Manifest(first)
            for line in f:
                rec = json.loads(line)
                kind = rec["type"]
                if kind == "page":
                    m.pages[rec["url"]] = rec
                elif kind == "host":
                    m.hosts[rec["host"]] = rec
                elif kind == "cluster":
                    m.clusters.append(rec)
    except (OSError, EOFError, json.JSONDecodeError, KeyError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a readable websim manifest ({exc})") from exc
    return m


def canonical(url: str) -> str | None:
    """Re-exported so callers compare URLs exactly as the manifest spells them."""
    return canonicalize(url)
