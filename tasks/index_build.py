"""Gathering page versions and building a fragment index from them.

Versions come from either

* crawl directories (:func:`crawl_versions`): ``DIR/warc`` responses of the HTML pages whose link
  record says status 200, ``text/html`` and no error; the crawls are given oldest first and the i-th crawl is
  **epoch i** (a URL fetched twice in one crawl keeps its last body); or
* the websim model directly (:func:`websim_versions`): every live HTML page of
  ``WebModel.generate(..., epoch=K)`` rendered for K = 0 … epochs-1, no HTTP involved (what the
  benchmark uses to save the crawl time; the pages are the bytes the server would send).

Terms are :func:`raycrawl.text.terms` (the one text pipeline). DocIDs follow the lexicographic
order of URLs (as the URL map numbers them), so the index's page order is reproducible.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.crawl_epochs import View
from raycrawl.storage.fragment_index import FragmentIndex, FragmentIndexBuilder
from raycrawl.text import terms
from raycrawl.winnowing import DEFAULT_B, DEFAULT_W

log = logging.getLogger(__name__)

# url → {epoch: terms}
Versions = dict[str, dict[int, list[str]]]


SNIPPET_CHARS = 4000  # enough of a typical page to find a query word in


def _snippet(body: bytes | str) -> str:
    from raycrawl.text import visible_text

    return " ".join(visible_text(body).split())[:SNIPPET_CHARS]


Captures = dict[str, dict[int, list]]  # url → {epoch: [crawl dir, WARC file, offset, time, title]}


def crawl_versions(crawl_views: Iterable[View], snippets: dict[str, str] | None = None,
                   captures: Captures | None = None) -> Versions:
    """Versions of every 200 HTML page of each view (``storage.crawl_epochs.views`` of the crawls,
    oldest first): a crawl is one epoch, a periodic crawl (``crawl --revisit``) one epoch per pass
    (an unchanged page keeps its version). ``snippets`` (if given) receives the start of each URL's
    latest visible text; ``captures`` where each version is archived (the WARC record holding its
    bytes, with that capture's time and title), for the search page's links."""
    from raycrawl.storage.crawl_pages import iter_pages, snapshot_pages
    from raycrawl.text import decode_body

    out: Versions = {}
    done: dict[tuple[Path, str, int], tuple[list[str], str]] = {}  # a capture read once for all its epochs
    for epoch, view in enumerate(crawl_views):
        pages = iter_pages(view.dir) if view.snapshot is None else snapshot_pages(view.dir, view.records())
        stored, crawl = {}, str(view.dir.resolve())
        if captures is not None:  # the record whose WARC position holds the bytes: its time and title
            stored = {r.warc: (r.time, r.title) for r in view.records() if r.warc}
        n = 0
        for page in pages:
            key = (view.dir, *page.warc)
            if key not in done:
                # Decoded as the crawler and the summaries decode them (HTTP charset, BOM, <meta
                # charset>): read as UTF-8 bytes, a windows-1251 page lost its Cyrillic words.
                body = decode_body(page.body, page.charset)[0]
                done[key] = (terms(body), _snippet(body) if snippets is not None else "")
            out.setdefault(page.url, {})[epoch], snippet = done[key]
            if snippets is not None:
                snippets[page.url] = snippet
            if captures is not None:
                when, title = stored.get(tuple(page.warc), (None, ""))
                captures.setdefault(page.url, {})[epoch] = [crawl, *page.warc, when, title]
            n += 1
        log.info("%s (epoch %d): %d HTML pages", view.name, epoch, n)
    return out


def websim_versions(hosts: int, ips: int, seed: int, epochs: int, pages_per_host_mean: float = 25.0) -> Versions:
    """Versions of every live HTML page of the websim model at epochs 0 … epochs-1 (no server)."""
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    out: Versions = {}
    for epoch in range(epochs):
        model = WebModel.generate(hosts=hosts, ips=ips, seed=seed, epoch=epoch, pages_per_host_mean=pages_per_host_mean)
        r = Renderer(model, port=80)
        for host, page in model.live_html_pages():
            out.setdefault(r.url(host.name, page.path), {})[epoch] = terms(r.html(host, page))
    return out


def page_scores(crawl_dir: str | Path | None) -> tuple[dict[str, float], dict[str, float]]:
    """({url: PageRank} from DIR/ranks.parquet, {host: spam score} from DIR/spam/scores.parquet),
    each empty when the file is missing (run ``raycrawl rank`` / ``raycrawl spam score`` first)."""
    pr: dict[str, float] = {}
    spam: dict[str, float] = {}
    if crawl_dir is None:
        return pr, spam
    import pyarrow.parquet as pq

    d = Path(crawl_dir)
    if (d / "ranks.parquet").exists():
        t = pq.read_table(d / "ranks.parquet", columns=["url", "pagerank"]).to_pydict()
        pr = {u: p for u, p in zip(t["url"], t["pagerank"], strict=True) if u}
    if (layout(d).spam / "scores.parquet").exists():
        t = pq.read_table(layout(d).spam / "scores.parquet").to_pydict()
        if "host" in t and "score" in t:
            spam = dict(zip(t["host"], t["score"], strict=True))
    return pr, spam


def build_index(versions: Versions, policy: str = "global", b: int = DEFAULT_B, w: int = DEFAULT_W,
                pagerank: dict[str, float] | None = None, spam: dict[str, float] | None = None,
                snippets: dict[str, str] | None = None, captures: Captures | None = None) -> FragmentIndex:
    """The fragment index of ``versions`` under ``policy`` (pages in URL order, versions by epoch)."""
    from raycrawl.policies.spam_page import host_name  # spam scores are per host without port

    builder = FragmentIndexBuilder(policy, b, w)
    pagerank = pagerank or {}
    spam = spam or {}
    for url in sorted(versions):
        vs = versions[url]
        builder.add_page(url, [(e, vs[e]) for e in sorted(vs)], pagerank.get(url),
                         spam.get(host_name(url)) if spam else None)
    index = builder.finish()
    if snippets:
        index.snippets = [snippets.get(u, "") for u in index.urls]
    if captures:
        index.captures = [[[e, *c] for e, c in sorted(captures.get(u, {}).items())] for u in index.urls]
    return index
