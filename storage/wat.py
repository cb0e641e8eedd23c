"""WAT files: the metadata of a crawl's WARC records as JSON, laid out as Common Crawl lays them out
(issue 54), so that code written for its WAT files (cc-pyspark's ``wat_extract_links``, link
studies) reads a crawl unchanged.

``OUT/wat/NAME.warc.wat.gz`` beside each ``OUT/warc/NAME.warc.gz``: a ``warcinfo`` record, then one
``metadata`` record (``Content-Type: application/json``, ``WARC-Refers-To`` the record described)
per WARC record, in the file's order. Its JSON, as Common Crawl's:

- ``Container``: the WARC file's name, ``Compressed``, the record's ``Offset``;
- ``Envelope``: ``WARC-Header-Metadata`` (every WARC header), ``Block-Digest``,
  ``Actual-Content-Length``, and ``Payload-Metadata``: for a response ``HTTP-Response-Metadata``
  (``Response-Message``: version, status, reason; ``Headers``; ``Entity-Length``), for a request
  ``HTTP-Request-Metadata`` (``Request-Message``: method, path, version; ``Headers``);
- for an HTML response, ``HTML-Metadata``: ``Head`` (``Title``, ``Base``, ``Metas``: each meta's
  attributes, ``Link``: the ``<link>`` elements, ``Scripts``) and ``Links``: every link-bearing
  element of the document with its path as Common Crawl writes it (``A@/href``, ``AREA@/href``,
  ``IMG@/src``, ``IFRAME@/src``, ``FRAME@/src``, ``FORM@/action``, ``EMBED@/src``, ``SOURCE@/src``,
  ``VIDEO@/src``, ``AUDIO@/src``), its ``url`` as written in the page (relative, as there), and
  ``text``, ``title``, ``rel``, ``alt`` when it has them.

The page is read as every stage reads it (core/text.py: the browsers' charset rules, lexbor's
HTML parser). Each record is a gzip member of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastwarc.warc import WarcRecord, WarcRecordType

from raycrawl.exchange import content_type_charset
from raycrawl.storage.crawl_pages import HTML_TYPES, media_type
from raycrawl.storage.warc import base_info, derived_path, iter_file, new_record, warc_files, write_records
from raycrawl.text import decode_body, html_tree, looks_binary

WAT_SUFFIX = ".warc.wat.gz"
MAX_TEXT = 500  # characters of a link's text kept
# Link-bearing elements of a page's body: (tag, attribute), written as TAG@/attribute.
BODY_LINKS = (("a", "href"), ("area", "href"), ("img", "src"), ("iframe", "src"), ("frame", "src"),
              ("form", "action"), ("embed", "src"), ("source", "src"), ("video", "src"), ("audio", "src"))


def _kept(node: Any, *names: str) -> dict[str, str]:
    return {n: v for n in names if (v := node.attributes.get(n)) is not None}


def html_metadata(body: bytes, content_type: str = "") -> dict[str, Any]:
    """``HTML-Metadata`` of a page's body."""
    if not body or looks_binary(body):
        return {}
    tree = html_tree(decode_body(body, content_type_charset(content_type))[0])
    head: dict[str, Any] = {}
    if (title := tree.css_first("title")) is not None:
        head["Title"] = " ".join(title.text(separator=" ").split())
    if (base := tree.css_first("base[href]")) is not None:
        head["Base"] = base.attributes.get("href") or ""
    metas = [{k: v or "" for k, v in m.attributes.items()} for m in tree.css("meta")]
    if metas:
        head["Metas"] = metas
    links = [{"path": "LINK@/href", "url": n.attributes.get("href") or "", **_kept(n, "rel", "type", "title")}
             for n in tree.css("link[href]")]
    if links:
        head["Link"] = links
    scripts = [{"path": "SCRIPT@/src", "url": n.attributes.get("src") or "", **_kept(n, "type")}
               for n in tree.css("script[src]")]
    if scripts:
        head["Scripts"] = scripts
    body_links = []
    selector = ", ".join(f"{tag}[{attr}]" for tag, attr in BODY_LINKS)
    attr_of = dict(BODY_LINKS)
    for node in tree.css(selector):
        link = {"path": f"{node.tag.upper()}@/{attr_of[node.tag]}", "url": node.attributes.get(attr_of[node.tag]) or ""}
        if node.tag == "a" and (text := " ".join(node.text(separator=" ").split())):
            link["text"] = text[:MAX_TEXT]
        link.update(_kept(node, "title", "rel", "alt", "target"))
        body_links.append(link)
    meta: dict[str, Any] = {}
    if head:
        meta["Head"] = head
    if body_links:
        meta["Links"] = body_links
    return meta


def _http(rec: WarcRecord) -> tuple[list[str], dict[str, str]]:
    """The three parts of an HTTP message's first line, and its headers (repeated ones joined)."""
    first = ((rec.http_headers.status_line or "").split(" ", 2) + ["", "", ""])[:3]
    headers: dict[str, str] = {}
    for key, value in rec.http_headers.astuples():
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return first, headers


def envelope(rec: WarcRecord, block: bytes) -> dict[str, Any]:
    """``Envelope`` of one WARC record (its HTTP message parsed; ``block`` its payload)."""
    env: dict[str, Any] = {"Format": "WARC", "WARC-Header-Metadata": dict(rec.headers.astuples()),
                           "Actual-Content-Length": rec.headers.get("Content-Length") or str(rec.content_length)}
    if digest := rec.headers.get("WARC-Block-Digest"):
        env["Block-Digest"] = digest
    payload: dict[str, Any] = {"Actual-Content-Type": rec.headers.get("Content-Type") or ""}
    if rec.http_headers is not None and rec.record_type == WarcRecordType.response:
        (version, status, reason), headers = _http(rec)
        http: dict[str, Any] = {"Response-Message": {"Version": version, "Status": status, "Reason": reason},
                                "Headers": headers, "Entity-Length": str(len(block))}
        content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        if media_type(content_type) in HTML_TYPES and (html := html_metadata(block, content_type)):
            http["HTML-Metadata"] = html
        payload["HTTP-Response-Metadata"] = http
    elif rec.http_headers is not None and rec.record_type == WarcRecordType.request:
        (method, path, version), headers = _http(rec)
        payload["HTTP-Request-Metadata"] = {"Request-Message": {"Method": method, "Path": path, "Version": version},
                                            "Headers": headers}
    env["Payload-Metadata"] = payload
    return env


def write_wat(warc: Path, out: Path) -> dict[str, tuple[int, int]]:
    """The WAT file ``out`` of the WARC file ``warc`` (written whole, then renamed into place):
    {WARC-Record-ID described: (offset, length) of its metadata record}."""

    def described() -> Iterator[tuple[str, WarcRecord]]:
        for _, offset, rec in iter_file(warc, WarcRecordType.any_type):  # (damage skipped, with a warning)
            block = rec.reader.read()
            doc = {"Container": {"Filename": warc.name, "Compressed": warc.name.endswith(".gz"),
                                 "Offset": str(offset)},
                   "Envelope": envelope(rec, block)}
            headers = {"WARC-Target-URI": rec.headers.get("WARC-Target-URI") or rec.headers.get("WARC-Filename")
                       or warc.name,
                       "WARC-Date": rec.headers.get("WARC-Date") or "",
                       "WARC-Refers-To": rec.headers.get("WARC-Record-ID") or "",
                       "Content-Type": "application/json"}
            data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            yield headers["WARC-Refers-To"], new_record(WarcRecordType.metadata, data, headers, http=False)

    info = {**base_info(), "format": "WARC File Format 1.1",
            "description": f"Metadata of the records of {warc.name} (raycrawl storage/wat.py)"}
    return write_records(out, info, described())


def write_crawl_wat(warc_dir: Path, out_dir: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """A WAT file for every WARC file of a crawl: {WAT file name: its records (write_wat)}."""
    return {(path := derived_path(warc, out_dir, WAT_SUFFIX)).name: write_wat(warc, path)
            for warc in warc_files(warc_dir)}
