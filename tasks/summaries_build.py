"""Building a crawl's archive of summaries (seed 000): pages to term counts, then the archive.

The pages are the crawl's pages (storage/crawl_pages.py), read from the WARC files or from the
summary writer's spill (``--from-spill``); a page fetched twice counts once; a page rendered in a
browser is its rendered DOM's text (either way); an exact duplicate takes its representative's
summary. ``raycrawl summaries build`` is the command over it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.warc import warc_files

log = logging.getLogger(__name__)


def iter_warc_pages(crawl_dir: Path) -> Iterator[tuple[str, str]]:
    """(URL, visible text) of every page of the crawl (storage/crawl_pages.py), read as the parser
    reads it at crawl time (``raycrawl.text.page_text``: its charset rules, binary bodies empty)."""
    from raycrawl.storage.crawl_pages import iter_pages
    from raycrawl.text import page_text

    if not warc_files(layout(crawl_dir).warc):
        raise UserError(f"{crawl_dir}/warc: no WARC files (is {crawl_dir} a crawl directory?)")
    for page in iter_pages(crawl_dir):
        yield page.url, page_text(page.body, page.charset)


def iter_rendered_doms(crawl_dir: Path) -> Iterator[tuple[str, str]]:
    """(URL, visible text) of every DOM the crawl rendered (the WARC ``resource`` records
    ``urn:dom:URL`` of actors/visit/stages/render.py) whose render did not fail, in crawl order."""
    from fastwarc.warc import WarcRecordType

    from raycrawl.storage.link_records import RENDERED_SUBDIR, iter_link_records
    from raycrawl.storage.warc import DOM_URI, iter_records
    from raycrawl.text import page_text

    failed = {rec.url for rec in iter_link_records(crawl_dir, RENDERED_SUBDIR) if rec.error}  # (what there was of a DOM)
    for _, _, rec in iter_records(layout(crawl_dir).warc, WarcRecordType.resource):
        target = rec.headers.get("WARC-Target-URI", "")
        if target.startswith(DOM_URI) and target[len(DOM_URI):] not in failed:
            yield target[len(DOM_URI):], page_text(rec.reader.read(), "utf-8")


def warc_records(crawl_dir: Path) -> list[dict]:
    """The summary records of the crawl's pages read from its WARC files, as the crawl spills them:
    a rendered page's (``rendered``: true) from its DOM, which :func:`_once_per_url` prefers."""
    from raycrawl.actors.visit.summary_writer import document_counts

    records = []
    for rendered, docs in ((False, iter_warc_pages(crawl_dir)), (True, iter_rendered_doms(crawl_dir))):
        for url, visible in docs:
            length, counts = document_counts(visible)
            records.append({"url": url, "length": length, "terms": counts, **({"rendered": True} if rendered else {})})
    return records


def build(crawl_dir: Path, min_df: int = 20, codes: dict[str, str] | None = None,
          from_spill: bool = False) -> dict:
    """Build ``DIR/summaries/`` (two passes) and return the archive properties."""
    from raycrawl.storage import summaries, summary_spill
    from raycrawl.storage.crawl_graph import node_map

    crawl_dir = Path(crawl_dir)
    if not crawl_dir.is_dir():
        raise UserError(f"{crawl_dir}: no such crawl directory")
    if min_df < 1:
        raise UserError(f"--min-df must be ≥ 1, got {min_df}")
    id_of, _, num_nodes, source = node_map(crawl_dir)
    if from_spill:
        paths = summary_spill.spill_paths(crawl_dir)
        if not paths:
            raise UserError(f"{crawl_dir}: no spill files under summaries/spill/")
        records = _once_per_url(summary_spill.iter_spill(paths))
        records += _exact_duplicates(crawl_dir, records)
        again = None
    else:
        # One pass over the WARCs turns pages into counts; held in memory for the second pass.
        records = _once_per_url(warc_records(crawl_dir))
        records += _exact_duplicates(crawl_dir, records)
        again = None
    if num_nodes == 0:
        raise UserError(f"{crawl_dir}: no link records, so no node ids (crawl first)")
    base = layout(crawl_dir).summaries / summaries.DEFAULT_BASENAME
    return summaries.build_archive(records, base, id_of, num_nodes, min_df, codes,
                                   records_again=again, extra={"node_ids": source})


def _once_per_url(records) -> list[dict]:
    """One record per URL, the first fetch's: a page fetched again after a crash (it was in flight)
    is spilled and archived twice, but it is one document of the collection. A page the crawl
    rendered in a browser is its first rendered DOM's text (what a reader sees), not its markup's."""
    first: dict[str, dict] = {}
    for rec in records:
        old = first.get(rec["url"])
        if old is None or (rec.get("rendered") and not old.get("rendered")):
            first[rec["url"]] = rec
    return list(first.values())


def _exact_duplicates(crawl_dir: Path, records: list[dict]) -> list[dict]:
    """Summaries for exact duplicates: the WARC reader skips them (marked crawl-time duplicates, or
    revisits with no body), but their visible text is their representative's, so they get its
    summary and stay in the archive."""
    from raycrawl.storage.link_records import iter_link_records

    by_url = {r["url"]: r for r in records}
    out = []
    for rec in iter_link_records(crawl_dir):
        url, rep = rec.url, rec.dup_of
        if rec.dup_kind == "exact" and rep in by_url and url not in by_url:
            out.append({**by_url[rep], "url": url})
            by_url[url] = out[-1]
    if out:
        log.info("%d exact duplicates (WARC revisits) take their representative's summary", len(out))
    return out
