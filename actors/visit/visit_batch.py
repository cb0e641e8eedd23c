"""What one batch of finished visits means for the crawl — decided with no Ray and no Redis.

The committer (actors/visit/batch_commit.py) gathers the inputs (the parser's results and what the
stages found in the batch — duplicates among them: :class:`~actors.visit.visit_stage.Findings`) and
carries out the outputs (the store writer, the sieves, the commit); this module is the decision in
between: for each visit its link record, whether its WARC record is a revisit, the links to follow,
the summaries to spill and the counters of the batch. The crawl-time features take part as stages
(actors/visit/visit_stage.py), duplicates and summaries included.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from raycrawl.actors.visit.store_writer import StoreItem
from raycrawl.actors.visit.visit_stage import Findings, Outcome, PageVisit, Stages
from raycrawl.exchange import FetchResult, VisitKind
from raycrawl.storage.link_records import LinkRecord
from raycrawl.storage.warc import sha1_b32


@dataclass
class BatchDecision:
    items: list[StoreItem] = field(default_factory=list)
    """What the store writer writes (robots.txt exchanges: no link record)."""
    counters: Counter[str] = field(default_factory=Counter)
    follow: list[str] = field(default_factory=list)
    """Links (and redirect targets) that every stage let through, in order."""
    levels: list[int] = field(default_factory=list)
    """The priority level of each link in ``follow`` (a focused crawl's front queue; else 0)."""
    summarise: list[str] = field(default_factory=list)
    """The pages whose summaries are spilled with their records."""


def error_kind(fr: FetchResult) -> str | None:
    if fr.error:
        return fr.error
    if 400 <= fr.status < 500:
        return "http-4xx"
    if fr.status >= 500:
        return "http-5xx"
    return None


NOT_REQUESTED = frozenset({"robots", "robots-unavailable", "spam", "filtered", "forbidden-network", "dns",
                           "blocked", "operator-scope", "budget"})
"""Error kinds of URLs no request was sent for."""


def page_record(o: Outcome, sha1s: dict[str, str]) -> LinkRecord:
    """The link record of a page visit with nothing found in the page yet."""
    fr = o.fr
    error = error_kind(fr)
    return LinkRecord(
        url=fr.url, status=fr.status, ctype=fr.ctype, time=fr.ended, ip=fr.ip, size=len(fr.body), error=error,
        # When the request began (the crawl log's fetch duration); none for a URL never requested.
        started=(fr.started or None) if error not in NOT_REQUESTED else None,
        redirect=fr.redirect, level=o.level, etag=fr.headers.get("etag"), modified=fr.headers.get("last-modified"),
        sha1=(sha1s.get(fr.url) or sha1_b32(fr.body)) if fr.status > 0 and fr.status != 304 else None)


def _render(o: Outcome, found: Findings, d: BatchDecision) -> list[tuple[str, int]]:
    """A render of a page (actors/visit/stages/render.py): counted; the last one's DOM and record
    stored, its links followed (the DOM's parse: links made by scripts among them)."""
    fr, r = o.fr, o.render
    d.counters["render:renders"] += 1
    if r.rendered.error:
        d.counters[f"render:{r.rendered.error}"] += 1
    if not r.final:
        return []
    pr = found.rendered.get(fr.url)
    rec = LinkRecord(url=fr.url, status=200, ctype="text/html", time=fr.ended, started=fr.started,
                     size=len(fr.body), links=pr.links if pr is not None else [],
                     embeds=list(r.rendered.requested), title=pr.title if pr is not None else "",
                     digest=pr.digest if pr is not None else None, level=o.level,
                     error=f"render-{r.rendered.error}" if r.rendered.error else None)
    d.counters["rendered"] += 1
    d.items.append(StoreItem(fr, None, rec, rendered=True, screenshot=r.rendered.screenshot))
    if r.summarise and pr is not None and not r.rendered.error:
        d.summarise.append(fr.url)
    return [(u, o.level) for u in rec.links]


def decide(outcomes: list[Outcome], found: Findings, stages: Stages) -> BatchDecision:
    """The decision over ``outcomes`` given what was found in the batch (parse results by URL,
    duplicates, payload digests) and the crawl's stages (actors/visit/visit_stage.py), which observe each
    visit and judge each link. A duplicate's links are not followed (they are its original's); a
    redirect target keeps the level its source was queued with; a sitemap's URLs get its own."""
    d = BatchDecision()
    counters = d.counters
    links: list[tuple[str, int]] = []
    embeds: list[tuple[str, int, str, bool]] = []  # page requisites: (URL, level, whose, a stylesheet)
    for o in outcomes:
        fr = o.fr
        if o.kind == VisitKind.ROBOTS:
            counters["robots"] += 1
            kind = error_kind(fr)
            if kind:
                counters[f"robots_error:{kind}"] += 1
            counters["bytes"] += len(fr.body)
            d.items.append(StoreItem(fr, robots=True))
            links += [(u, 0) for u in stages.robots(fr, counters)]
            continue
        if o.kind == VisitKind.SESSION:  # (archived as exchanged; never a page of the crawl)
            counters["session_exchanges"] += 1
            counters["bytes"] += len(fr.body)
            d.items.append(StoreItem(fr))
            continue
        if o.kind == VisitKind.RENDER:
            links += _render(o, found, d)
            # What the page asked for and the archive lacked: its requisites, as its markup's are.
            embeds += [(u, 0, fr.url, False) for u in o.render.asks]
            continue
        pr = found.parsed.get(fr.url)
        rec = page_record(o, found.sha1s)
        visit = PageVisit(o, pr, rec, counters, link_level=rec.level if pr is not None and pr.sitemap else 0)
        if pr is not None:
            rec.digest, rec.title, rec.canonical, rec.score = pr.digest, pr.title, pr.canonical, pr.score
            rec.links = pr.links
        stages.observe(visit)
        if visit.summarise:
            d.summarise.append(fr.url)
        if visit.revisit is not None:
            rec.revisit_of = (visit.revisit[0], visit.revisit[1])
        if fr.redirect:
            counters["redirects"] += 1
            links.append((fr.redirect, rec.level))
        links += [(u, visit.link_level) for u in rec.links]
        sheets = set(pr.sheets) if pr is not None else set()
        embeds += [(u, visit.link_level, fr.url, u in sheets) for u in rec.embeds]
        counters["pages"] += 1
        counters[f"status:{fr.status}"] += 1
        if fr.status:
            counters[f"ctype:{fr.ctype or 'none'}"] += 1
        if rec.error:
            counters[f"error:{rec.error}"] += 1
        if o.attempts > 1:
            counters["retries"] += o.attempts - 1
        counters["bytes"] += len(fr.body)
        d.items.append(StoreItem(fr, visit.revisit, rec))
    for url, lvl in links:
        why = stages.judge(url, (urlsplit(url).hostname or "").lower())
        if why is None:
            d.follow.append(url)
            d.levels.append(lvl)
        else:
            counters[f"filtered:{why}"] += 1
    counters["links"] += len(d.follow)
    for url, lvl, parent, sheet in embeds:
        why = stages.judge_requisite(url, (urlsplit(url).hostname or "").lower(), parent, sheet)
        if why is None:
            d.follow.append(url)
            d.levels.append(lvl)
            counters["requisites"] += 1
        else:
            counters[f"filtered:{why}"] += 1
    return d
