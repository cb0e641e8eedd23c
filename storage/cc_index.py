"""The columnar URL index of a crawl in Common Crawl's ``cc-index-table`` schema (issue 54), so that
the queries written for theirs (Athena, Spark SQL, DuckDB) run on a crawl of one's own unchanged.

``OUT/cc-index/table/cc-main/warc/crawl=NAME/subset=SUBSET/part-00000.parquet``, partitioned as
theirs is (Hive-style ``crawl`` and ``subset``, which are therefore not columns of the files): one
row per capture (``response`` and ``revisit`` records), ``subset`` ``warc`` for the 200s and the
revisits, ``robotstxt`` for robots.txt, ``crawldiagnostics`` for the rest (redirects, 404s…), with
every column of their flat schema (``cc-index-schema-flat.json``) under its name and type: the URL
and its host's parts (the registry and private suffixes from the Public Suffix List that tldextract
ships, never fetched), fetch time and status, redirect, payload digest, declared and detected
types, charset, languages (of the WET text: storage/wet.py), truncation, the WARC record's id, file,
offset and length. One step beyond theirs: each row also gives the page's WET and WAT records
(``wet_filename``, ``wet_record_offset``, ``wet_record_length``, and the same for ``wat_``), which
this command writes beside the WARC files in the same pass. The crawl's CDXJ index is written again
with the same facts on each capture's line (``charset``, ``languages``, ``wet_filename``,
``wet_offset``, ``wet_length``, ``wat_…``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastwarc.warc import WarcRecordType

from raycrawl.exchange import content_type_charset
from raycrawl.storage.crawl_pages import HTML_TYPES
from raycrawl.storage.warc import derived_path, fetched_for_robots, iter_file, warc_files
from raycrawl.storage.wat import WAT_SUFFIX, write_wat
from raycrawl.storage.wet import WET_SUFFIX, write_wet
from raycrawl.text import decode_body
from raycrawl.urls import is_ip_literal

TABLE = Path("cc-index") / "table" / "cc-main" / "warc"
# (name, pyarrow type) of cc-index-schema-flat.json, in its order, then ours.
COLUMNS = (
    ("url_surtkey", "string"), ("url", "string"), ("url_host_name", "string"), ("url_host_tld", "string"),
    ("url_host_2nd_last_part", "string"), ("url_host_3rd_last_part", "string"),
    ("url_host_4th_last_part", "string"), ("url_host_5th_last_part", "string"),
    ("url_host_registry_suffix", "string"), ("url_host_registered_domain", "string"),
    ("url_host_private_suffix", "string"), ("url_host_private_domain", "string"),
    ("url_host_name_reversed", "string"), ("url_protocol", "string"), ("url_port", "int32"), ("url_path", "string"),
    ("url_query", "string"), ("fetch_time", "timestamp"), ("fetch_status", "int16"), ("fetch_redirect", "string"),
    ("content_digest", "string"), ("content_mime_type", "string"), ("content_mime_detected", "string"),
    ("content_charset", "string"), ("content_languages", "string"), ("content_truncated", "string"),
    ("warc_record_id", "binary"), ("warc_filename", "string"), ("warc_record_offset", "int32"),
    ("warc_record_length", "int32"), ("warc_segment", "string"),
    ("wet_filename", "string"), ("wet_record_offset", "int32"), ("wet_record_length", "int32"),
    ("wat_filename", "string"), ("wat_record_offset", "int32"), ("wat_record_length", "int32"),
)


def _extractors():  # noqa: ANN202 - two tldextract extractors
    import tldextract

    # suffix_list_urls=(): the list tldextract ships, never one fetched (no network here)
    return (tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None),
            tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True))


def url_columns(url: str, extractors: tuple) -> dict[str, Any]:
    """The ``url_*`` columns of a URL."""
    import surt

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    row: dict[str, Any] = {"url_surtkey": surt.surt(url), "url": url, "url_host_name": host,
                           "url_protocol": parts.scheme, "url_port": parts.port, "url_path": parts.path or "/",
                           "url_query": parts.query or None}
    labels = [] if is_ip_literal(host) else host.rstrip(".").split(".")
    for i, name in enumerate(("tld", "2nd_last_part", "3rd_last_part", "4th_last_part", "5th_last_part"), 1):
        row[f"url_host_{name}"] = labels[-i] if len(labels) >= i else None
    row["url_host_name_reversed"] = ".".join(reversed(labels)) if labels else None
    for (kind, domain), ex in zip((("registry", "registered"), ("private", "private")), extractors, strict=True):
        found = ex(host) if labels else None
        row[f"url_host_{kind}_suffix"] = found.suffix or None if found else None
        row[f"url_host_{domain}_domain"] = (f"{found.domain}.{found.suffix}" if found and found.suffix and found.domain
                                            else None)
    return row


def _subset(status: int, revisit: bool, robots: bool) -> str:
    """``robots``: a record of a robots.txt fetch (a redirect robots.txt followed, too: Common Crawl
    files those with the robots.txt files)."""
    if robots:
        return "robotstxt"
    return "warc" if status == 200 or revisit else "crawldiagnostics"


def capture_row(rec: Any, block: bytes, extractors: tuple) -> dict[str, Any]:
    """The columns of one capture that its record alone gives (not its length, WET or WAT)."""
    url = rec.headers.get("WARC-Target-URI") or ""
    http = rec.http_headers
    status = http.status_code if http is not None else 0
    headers = {k.lower(): v for k, v in (http.astuples() if http is not None else [])}
    content_type = headers.get("content-type", "")
    mime = content_type.split(";", 1)[0].strip().lower() or None
    charset = None
    declared = content_type_charset(content_type)
    if block and mime in HTML_TYPES:
        charset = decode_body(block, declared)[1].upper()
    elif declared:
        charset = declared.upper()
    digest = rec.headers.get("WARC-Payload-Digest") or ""
    record_id = (rec.headers.get("WARC-Record-ID") or "").strip("<>").rsplit(":", 1)[-1]
    revisit = rec.record_type == WarcRecordType.revisit
    return {**url_columns(url, extractors),
            "fetch_time": datetime.fromisoformat(rec.headers.get("WARC-Date").replace("Z", "+00:00")),
            "fetch_status": status,
            "fetch_redirect": headers.get("location") if 300 <= status < 400 else None,
            "content_digest": digest.split(":", 1)[-1] or None,
            "content_mime_type": "warc/revisit" if revisit else mime,
            "content_mime_detected": rec.headers.get("WARC-Identified-Payload-Type") or (None if revisit else mime),
            "content_charset": charset,
            "content_truncated": rec.headers.get("WARC-Truncated"),
            "warc_record_id": uuid.UUID(record_id).bytes,
            "subset": _subset(status, revisit, fetched_for_robots(rec))}


def _captures(warc: Path, extractors: tuple) -> list[dict[str, Any]]:
    """Every capture of a WARC file, with its member's offset and length (up to the next record;
    a damaged stretch is skipped with a warning, storage/warc.py ``iter_records``)."""
    rows: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    for _, offset, rec in iter_file(warc, WarcRecordType.any_type):
        if last is not None:
            last["warc_record_length"] = offset - last["warc_record_offset"]
            last = None
        if rec.record_type in (WarcRecordType.response, WarcRecordType.revisit):
            last = {**capture_row(rec, rec.reader.read(), extractors), "warc_filename": warc.name,
                    "warc_record_offset": offset, "warc_segment": "0", "_id": rec.headers.get("WARC-Record-ID")}
            rows.append(last)
    if last is not None:
        last["warc_record_length"] = warc.stat().st_size - last["warc_record_offset"]
    return rows


def _schema():  # noqa: ANN202 - the pyarrow schema of COLUMNS
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int16": pa.int16(), "binary": pa.binary(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(name, types[kind], nullable=name not in NOT_NULL) for name, kind in COLUMNS])


NOT_NULL = {"url_surtkey", "url", "url_host_name", "url_protocol", "url_path", "fetch_time", "fetch_status",
            "warc_record_id", "warc_filename", "warc_record_offset", "warc_record_length", "warc_segment"}


def write_cc_index(crawl_dir: Path, crawl: str) -> dict[str, int]:
    """The WET and WAT files of a crawl directory's WARC files (``DIR/wet``, ``DIR/wat``), then its
    index table (``DIR/cc-index/...``, crawl ``crawl``): {subset: rows}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raycrawl.storage.crawl_dir import layout

    lay, extractors = layout(crawl_dir), _extractors()
    rows: list[dict[str, Any]] = []
    for warc in warc_files(lay.warc):
        wet, wat = derived_path(warc, lay.wet, WET_SUFFIX), derived_path(warc, lay.wat, WAT_SUFFIX)
        texts = {c.refers_to: c for c in write_wet(warc, wet)}
        described = write_wat(warc, wat)
        for row in _captures(warc, extractors):
            record_id = row.pop("_id")
            if (text := texts.get(record_id)) is not None:
                row.update(wet_filename=wet.name, wet_record_offset=text.offset, wet_record_length=text.length,
                           content_languages=",".join(text.languages) or None)
            if (meta := described.get(record_id)) is not None:
                row.update(wat_filename=wat.name, wat_record_offset=meta[0], wat_record_length=meta[1])
            rows.append(row)
    table_dir = Path(crawl_dir) / TABLE / f"crawl={crawl}"
    counts: dict[str, int] = {}
    schema = _schema()
    for subset in ("warc", "crawldiagnostics", "robotstxt"):
        part = sorted((r for r in rows if r["subset"] == subset), key=lambda r: (r["url_surtkey"], r["fetch_time"]))
        directory = table_dir / f"subset={subset}"
        for old in directory.glob("*.parquet") if directory.exists() else []:
            old.unlink()
        if not part:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist([{name: r.get(name) for name, _ in COLUMNS} for r in part], schema=schema)
        pq.write_table(table, directory / "part-00000.parquet", compression="zstd")
        counts[subset] = len(part)
    _index_with(crawl_dir, rows)
    return counts


def _index_with(crawl_dir: Path, rows: list[dict[str, Any]]) -> None:
    """The crawl's CDXJ index written again, each capture with its charset, languages and WET/WAT
    records (Common Crawl's CDX gives the first two; none gives the others)."""
    from raycrawl.storage.cdxj import write_index

    extra: dict[tuple[str, int], dict[str, str]] = {}
    for r in rows:
        fields = {"charset": r.get("content_charset"), "languages": r.get("content_languages")}
        for kind in ("wet", "wat"):
            if r.get(f"{kind}_filename"):
                fields.update({f"{kind}_filename": r[f"{kind}_filename"], f"{kind}_offset": str(r[f"{kind}_record_offset"]),
                               f"{kind}_length": str(r[f"{kind}_record_length"])})
        extra[(r["warc_filename"], r["warc_record_offset"])] = {k: v for k, v in fields.items() if v}
    write_index(crawl_dir, extra=extra)
