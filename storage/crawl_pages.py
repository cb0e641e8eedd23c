"""The pages of a crawl: the one definition every analysis reads (dedup, summaries, spam features,
the index) and the crawl-time summary spill follows.

A *page* is a stored response to a URL of the crawl (not robots.txt) with HTTP status 200, an
HTML media type (``text/html`` or ``application/xhtml+xml``), its whole body (not cut at a size
cap: ``WARC-Truncated``; not torn by a kill), and not marked as a crawl-time duplicate of another
page (the link records say which page each duplicate repeats). A URL fetched again after a
crash is one page: its first record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastwarc.warc import WarcRecordType

from raycrawl.exchange import content_type_charset
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import LinkRecord
from raycrawl.storage.warc import DUPLICATE_OF, fetched_for_robots, iter_records, read_record_at, torn

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_page(url: str, status: int, ctype: str | None, truncated: bool = False, duplicate: bool = False) -> bool:
    """The rule, for one exchange (``ctype``: its Content-Type or media type)."""
    return (status == 200 and media_type(ctype) in HTML_TYPES and not truncated and not duplicate
            and not url.endswith("/robots.txt"))


def is_page_record(rec: LinkRecord) -> bool:
    """The rule for a link record (storage/link_records.py): a cut body has its ``error``."""
    return bool(rec.warc) and is_page(rec.url, rec.status, rec.ctype, truncated=bool(rec.error),
                                      duplicate=bool(rec.dup_of))


@dataclass
class Page:
    url: str
    body: bytes
    charset: str | None
    """The Content-Type header's charset, if any (decode with raycrawl.text.decode_body)."""
    warc: tuple[str, int]
    """(file name, offset) of its response record."""


def iter_pages(crawl_dir: str | Path) -> Iterator[Page]:
    """Every page of the crawl in ``crawl_dir``, in crawl order (damaged WARC records are skipped
    with a warning by storage.warc.iter_records)."""
    seen: set[str] = set()
    for name, offset, rec in iter_records(layout(Path(crawl_dir)).warc, WarcRecordType.response):
        url = rec.headers.get("WARC-Target-URI", "")
        http = rec.http_headers
        if not url or url in seen or http is None or fetched_for_robots(rec) or not is_page(
                url, http.status_code, rec.http_content_type, truncated=bool(rec.headers.get("WARC-Truncated")),
                duplicate=bool(rec.headers.get(DUPLICATE_OF))):
            continue
        body = rec.reader.read()
        if torn(name, offset, rec, next((v for k, v in http.astuples() if k.lower() == "content-length"), ""), body):
            continue
        seen.add(url)
        yield Page(url, body, rec.http_charset, (name, offset))


def snapshot_pages(crawl_dir: str | Path, records: Iterable[dict[str, Any]]) -> Iterator[Page]:
    """The pages among ``records`` (one pass's snapshot, storage/crawl_epochs.py), read from the
    WARC at the records' positions."""
    warc_dir = layout(Path(crawl_dir)).warc
    for rec in records:
        if not is_page_record(rec):
            continue
        name, offset = rec.warc
        try:
            url, headers, body = read_record_at(warc_dir, name, int(offset))
        except (OSError, ValueError) as exc:
            log.warning("%s@%s: unreadable record of %s skipped (%s)", name, offset, rec.url, exc)
            continue
        yield Page(url, body, content_type_charset(headers.get("content-type", "")), (name, int(offset)))
