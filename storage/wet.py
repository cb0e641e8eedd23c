"""WET files: a crawl's HTML pages as plain text, laid out as Common Crawl lays them out (issue 54),
so that code written for its WET files (cc-pyspark's jobs, text pipelines) reads a crawl unchanged.

``OUT/wet/NAME.warc.wet.gz`` beside each ``OUT/warc/NAME.warc.gz``: a ``warcinfo`` record, then one
``conversion`` record per HTML page answered 200 (not the crawl-time duplicates, not robots.txt), in the WARC
file's order, with the response's ``WARC-Target-URI`` and ``WARC-Date``, ``WARC-Refers-To`` its
``WARC-Record-ID``, ``WARC-Block-Digest``, ``Content-Type: text/plain`` and
``WARC-Identified-Content-Language`` (ISO 639-3, as Common Crawl writes it). Each record is a gzip
member of its own, so an index can give a page's WET offset (which Common Crawl's has not).

The text: the page decoded by the browsers' charset rules (core/text.py ``decode_body``), then
resiliparse's plain-text extraction with block structure kept (a line per paragraph, heading,
list item) — its main content only, as Common Crawl's users want for language models, unless that
leaves nothing (a page that is all navigation keeps its whole text). The language: resiliparse's
``detect_fast`` (101 languages) over that text, mapped to ISO 639-3 by pycountry; none for a text
too short to tell (under 40 characters).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from fastwarc.warc import WarcRecord, WarcRecordType

from raycrawl.exchange import content_type_charset
from raycrawl.storage.crawl_pages import HTML_TYPES, media_type
from raycrawl.storage.warc import (
    DUPLICATE_OF,
    base_info,
    derived_path,
    fetched_for_robots,
    iter_file,
    new_record,
    torn,
    warc_files,
    write_records,
)
from raycrawl.text import decode_body, looks_binary

WET_SUFFIX = ".warc.wet.gz"
MIN_LANGUAGE_TEXT = 40  # characters: detect_fast guesses wildly on less


class Conversion(NamedTuple):
    """One page's text as written: the response it converts (its WARC-Record-ID), where its record
    starts in the WET file, how long it is, the page's languages."""

    refers_to: str
    offset: int
    length: int
    languages: tuple[str, ...]


def html_text(body: bytes, content_type: str = "") -> str:
    """The page's text as its WET record holds it ("" for a binary body)."""
    from resiliparse.extract.html2text import extract_plain_text

    if not body or looks_binary(body):
        return ""
    html = decode_body(body, content_type_charset(content_type))[0]
    text = extract_plain_text(html, preserve_formatting=True, main_content=True)
    return text.strip() or extract_plain_text(html, preserve_formatting=True).strip()


def languages(text: str) -> tuple[str, ...]:
    """The text's language, ISO 639-3 (``deu``), or none when it is too short to tell."""
    import pycountry
    from resiliparse.parse.lang import detect_fast

    if len(text) < MIN_LANGUAGE_TEXT:
        return ()
    code, _ = detect_fast(text)
    found = pycountry.languages.get(alpha_2=code) if code else None
    return (found.alpha_3,) if found is not None else ()


def _pages(warc: Path) -> Iterator[tuple[WarcRecord, bytes]]:
    """The HTML pages answered 200 of one WARC file, with their bodies, in its order (not robots.txt,
    whatever type its server gave it: Common Crawl's WET files hold its ``warc`` subset's pages)."""
    for _, offset, rec in iter_file(warc, WarcRecordType.response):  # (damage skipped, with a warning)
        if rec.headers.get(DUPLICATE_OF) or rec.http_headers is None or rec.http_headers.status_code != 200:
            continue
        if fetched_for_robots(rec):  # (a redirect robots.txt followed, too)
            continue
        content_type = rec.http_headers.get("Content-Type") or ""
        if media_type(content_type) not in HTML_TYPES:
            continue
        body = rec.reader.read()
        if torn(warc.name, offset, rec, rec.http_headers.get("Content-Length") or "", body):
            continue
        yield rec, body


def write_wet(warc: Path, out: Path) -> list[Conversion]:
    """The WET file ``out`` of the WARC file ``warc`` (written whole, then renamed into place)."""
    langs_of: dict[str, tuple[str, ...]] = {}

    def conversions() -> Iterator[tuple[str, WarcRecord]]:
        for rec, body in _pages(warc):
            text = html_text(body, rec.http_headers.get("Content-Type") or "")
            langs = languages(text)
            headers = {"WARC-Target-URI": rec.headers.get("WARC-Target-URI", ""),
                       "WARC-Date": rec.headers.get("WARC-Date", ""),
                       "WARC-Refers-To": rec.headers.get("WARC-Record-ID", ""),
                       "Content-Type": "text/plain"}
            if langs:
                headers["WARC-Identified-Content-Language"] = ",".join(langs)
            langs_of[headers["WARC-Refers-To"]] = langs
            yield headers["WARC-Refers-To"], new_record(WarcRecordType.conversion, text.encode("utf-8"), headers,
                                                        http=False)

    info = {**base_info(), "format": "WARC File Format 1.1", "description": "Plain text of the HTML pages "
            f"of {warc.name} (raycrawl storage/wet.py: resiliparse's extraction and language detection)"}
    placed = write_records(out, info, conversions())
    return [Conversion(ref, offset, length, langs_of[ref]) for ref, (offset, length) in placed.items()]


def write_crawl_wet(warc_dir: Path, out_dir: Path) -> dict[str, list[Conversion]]:
    """A WET file for every WARC file of a crawl: {WET file name: its records}."""
    return {(path := derived_path(warc, out_dir, WET_SUFFIX)).name: write_wet(warc, path) for warc in warc_files(warc_dir)}
