"""What one batch of finished visits means for the crawl — decided with no Ray and no Redis.

The agent gathers the inputs (the parser's results, the shared digest table's answers, the
near-duplicate index's) and carries out the outputs (the store writer, the sieves, the commit);
this module is the decision in between: for each visit its link record, whether its WARC record is
a revisit, the links to follow and the counters of the batch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from raycrawl.exchange import FetchResult, VisitKind
from raycrawl.policies.robots import sitemaps_of
from raycrawl.storage.warc import sha1_b32
from raycrawl.urls import canonicalize


@dataclass
class BatchDecision:
    items: list[tuple[FetchResult, tuple[str, str, str] | None, dict[str, Any] | None]] = field(default_factory=list)
    """(exchange, revisit_of, link record) for the store writer (robots.txt exchanges: no record)."""
    counters: Counter[str] = field(default_factory=Counter)
    follow: list[str] = field(default_factory=list)
    """Links (and redirect targets) that passed the filters and the spam gate, in order."""
    levels: list[int] = field(default_factory=list)
    """The priority level of each link in ``follow`` (a focused crawl's front queue; else 0)."""


def error_kind(fr: FetchResult) -> str | None:
    if fr.error:
        return fr.error
    if 400 <= fr.status < 500:
        return "http-4xx"
    if fr.status >= 500:
        return "http-5xx"
    return None


NOT_REQUESTED = frozenset({"robots", "robots-unavailable", "spam", "filtered", "forbidden-network", "dns"})
"""Error kinds of URLs no request was sent for."""


def link_record(url: str, status: int, ctype: str, t: float, ip: str, size: int, error: str | None = None) -> dict:
    """A link record (fields in storage/link_records.py) with nothing found in the page yet."""
    return {"url": url, "status": status, "ctype": ctype, "time": t, "ip": ip, "size": size, "digest": None,
            "dup_of": None, "dup_kind": None, "links": [], "redirect": None, "error": error, "title": "",
            "warc": None, "epoch": 0, "canonical": None, "level": 0, "score": None,
            "sha1": None, "etag": None, "modified": None, "revisit_of": None}


def exact_duplicates(pages: list[tuple[FetchResult, str]], owners: list[str]
                     ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str, str]]]:
    """Read the digest table's answers: ``pages`` are (exchange, payload SHA-1) of the pages with
    a text digest, ``owners`` the table's entry for each digest (JSON [first URL, its WARC-Date,
    its payload SHA-1]). Returns ``dup_of`` (URL → (first URL, "exact")) and ``revisit_of`` (URL →
    (first URL, date, payload digest)) — a revisit only for a byte-identical, whole payload."""
    dup_of: dict[str, tuple[str, str]] = {}
    revisit_of: dict[str, tuple[str, str, str]] = {}
    for (fr, payload), owner in zip(pages, owners, strict=True):
        first_url, first_date, *first_payload = json.loads(owner)
        if first_url != fr.url:
            dup_of[fr.url] = (first_url, "exact")
            if first_payload == [payload] and not fr.truncated:
                revisit_of[fr.url] = (first_url, first_date, payload)
    return dup_of, revisit_of


def unchanged(fr: FetchResult, prior: list | None, sha1: str | None) -> tuple[str, str, str | None] | None:
    """The WARC revisit a revisited page's answer is (storage/crawl_epochs.py), or None: a 304 to
    our conditional GET → (captured URL, its date, None: profile server-not-modified); a whole 200
    whose payload SHA-1 is the last capture's → (URL, date, digest: identical-payload-digest).
    ``prior``: the page's last capture (``Capture.to_list``) when the fetch was a revisit;
    ``sha1``: the payload digest of ``fr.body``."""
    if prior is None:
        return None
    url, date, last = prior[0], prior[1], prior[2]
    if fr.status == 304:
        return url, date, None
    if fr.status == 200 and not fr.truncated and not fr.error and sha1 == last:
        return url, date, last
    return None


def decide(outcomes: list, parsed: dict[str, Any], dup_of: dict[str, tuple[str, str]],
           revisit_of: dict[str, tuple[str, str, str]], explain: Callable[[str], str | None],
           spam_gate: Any = None, focus: Any = None, epoch: int = 0,
           sha1s: dict[str, str] | None = None, follow_sitemaps: bool = False) -> BatchDecision:
    """The decision over ``outcomes`` (actors.fetch_loop.Outcome) given the parse results by URL,
    the duplicates found and the prefetch filters' ``explain`` (None: the URL passes). The spam
    gate, if any, observes every HTML page and blocks the links to its hosts. A focus policy
    (policies/focus.py) gives the links of a page the level of its score; a redirect target
    keeps the level its source was queued with. ``epoch``: the pass of a periodic crawl; a
    revisited page that did not change is a WARC revisit of its last capture (:func:`unchanged`).
    ``sha1s``: payload digests already computed, by URL (the others are computed here).
    ``follow_sitemaps``: the ``Sitemap:`` URLs of each robots.txt fetched are links to follow."""
    d = BatchDecision()
    counters = d.counters
    links: list[tuple[str, int]] = []
    for o in outcomes:
        fr = o.fr
        if o.kind == VisitKind.ROBOTS:
            counters["robots"] += 1
            kind = error_kind(fr)
            if kind:
                counters[f"robots_error:{kind}"] += 1
            counters["bytes"] += len(fr.body)
            d.items.append((fr, None, None))
            if follow_sitemaps and 200 <= fr.status < 300:
                found = [u for raw in sitemaps_of(fr.body) if (u := canonicalize(raw, fr.url))]
                counters["sitemaps"] += len(found)
                links += [(u, 0) for u in found]
            continue
        pr = parsed.get(fr.url)
        rec = link_record(fr.url, fr.status, fr.ctype, fr.ended, fr.ip, len(fr.body), error=error_kind(fr))
        # When the request began (the crawl log's fetch duration); none for a URL never requested.
        rec["started"] = (fr.started or None) if rec["error"] not in NOT_REQUESTED else None
        rec["redirect"] = fr.redirect
        rec["level"], rec["epoch"] = o.level, epoch
        rec["etag"], rec["modified"] = fr.headers.get("etag"), fr.headers.get("last-modified")
        if fr.status > 0 and fr.status != 304:
            rec["sha1"] = (sha1s or {}).get(fr.url) or sha1_b32(fr.body)
        revisit = unchanged(fr, o.prior, rec["sha1"])
        if revisit is not None:
            counters["revisit:not-modified" if revisit[2] is None else "revisit:identical"] += 1
        elif o.prior is not None:
            counters["revisit:changed"] += 1
        link_level = rec["level"] if pr is not None and pr.sitemap else 0  # a sitemap's URLs: its own level
        if pr is not None:
            rec["digest"], rec["title"], rec["canonical"] = pr.digest, pr.title, pr.canonical
            rec["score"] = pr.score
            if focus is not None and pr.score is not None:
                link_level = focus.link_level(pr.score)
                counters["focus:scored"] += 1
                counters["focus:relevant"] += pr.score >= 0.5  # the live harvest, as the classifier judges
            if fr.url in dup_of:  # a duplicate's links are not followed (they are its original's)
                rec["dup_of"], rec["dup_kind"] = dup_of[fr.url]
                counters[f"dup:{rec['dup_kind']}"] += 1
                if revisit is None and fr.url in revisit_of:
                    revisit = revisit_of[fr.url]
                    counters["dup:revisit-records"] += 1
            else:
                rec["links"] = pr.links
            if spam_gate is not None and fr.ctype == "text/html":
                host = (urlsplit(fr.url).hostname or "").lower()
                if spam_gate.observe(host, spam_gate.page_features(fr.body, host)):
                    counters["spam:gated_pages"] += 1
        if revisit is not None:
            rec["revisit_of"] = [revisit[0], revisit[1]]
        if fr.redirect:
            counters["redirects"] += 1
            links.append((fr.redirect, rec["level"]))
        links += [(u, link_level) for u in rec["links"]]
        counters["pages"] += 1
        counters[f"status:{fr.status}"] += 1
        if fr.status:
            counters[f"ctype:{fr.ctype or 'none'}"] += 1
        if rec["error"]:
            counters[f"error:{rec['error']}"] += 1
        if o.attempts > 1:
            counters["retries"] += o.attempts - 1
        counters["bytes"] += len(fr.body)
        d.items.append((fr, revisit, rec))
    for url, lvl in links:
        why = explain(url)
        if why is None and spam_gate is not None and spam_gate.is_blocked((urlsplit(url).hostname or "").lower()):
            why = "spam"
        if why is None:
            d.follow.append(url)
            d.levels.append(lvl)
        else:
            counters[f"filtered:{why}"] += 1
    counters["links"] += len(d.follow)
    return d
