"""The CDXJ index of a crawl's WARC files: what replay tools (pywb, and any CDXJ reader) look
captures up in, so a crawl replays without being indexed again.

One line per capture (``response`` and ``revisit`` records): ``SURT TIMESTAMP {json}``, the JSON
giving url, mime, status, digest, length, offset and filename (the bare WARC file name, which
Heritrix-style names keep unique across crawls: storage/warc.py). Lines are sorted, as pywb's
binary search requires. Written by webrecorder's ``cdxj-indexer`` (the format's reference
implementation, on warcio), one WARC file at a time: a file that cannot be read to its end (a
crawl killed mid-record leaves a torn last member) keeps the entries read before the damage, with
a warning, as every other reader of the archive here does.

A periodic crawl's ``server-not-modified`` revisits (a 304 to a conditional GET) are left out, as
web archives leave 304s out of replay indexes: replayed, they would answer 304 with no body (pywb
takes the revisit's own HTTP head). Replay at their time falls to the nearest capture, which for
an unchanged page is the one they revalidated. ``include_not_modified`` keeps them.

A response whose body ended early (``WARC-Truncated: disconnect`` or ``time``: the server cut it,
storage/warc.py) stays in its WARC file, bytes and all, but is no capture of the page: it is left
out, so replay never shows the part that arrived as the whole page with its 200. A body cut by
the crawl's own size cap (``length``) is a capture, as every crawler's is.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.warc import warc_files

log = logging.getLogger(__name__)
INDEX_NAME = "index.cdxj"


def _not_modified(line: str) -> bool:
    fields = json.loads(line.split(" ", 2)[2])
    return fields.get("mime") == "warc/revisit" and fields.get("status") == "304"


def file_lines(path: Path, include_not_modified: bool = False) -> list[str]:
    """The CDXJ lines of one WARC file (unsorted), as far as it can be read."""
    from cdxj_indexer.main import CDXJIndexer

    out = io.StringIO()
    indexer = CDXJIndexer(output=out, inputs=[])
    try:
        with open(path, "rb") as f:
            indexer.process_one(f, out, str(path))
    except Exception as exc:  # noqa: BLE001 - warcio's errors for a damaged file vary
        log.warning("%s: indexed up to a damaged record (%s)", path.name, str(exc)[:200])
    cut = _cut_short(path)
    return [line for line in out.getvalue().splitlines(keepends=True)
            if line.strip() and (include_not_modified or not _not_modified(line))
            and not (cut and int(json.loads(line.split(" ", 2)[2])["offset"]) in cut)]


CUT_SHORT = frozenset({"disconnect", "time"})


def _cut_short(path: Path) -> set[int]:
    """Offsets of the response records of ``path`` whose body ended early."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    offsets = set()
    try:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=False):
                if rec.headers.get("WARC-Truncated") in CUT_SHORT:
                    offsets.add(rec.stream_pos)
    except Exception as exc:  # noqa: BLE001 - as far as it reads; file_lines warned already
        log.debug("%s: scanned for cut-short records up to %s", path.name, exc)
    return offsets


def write_index(crawl_dir: str | Path, out: str | Path | None = None,
                include_not_modified: bool = False,
                extra: dict[tuple[str, int], dict[str, str]] | None = None) -> tuple[Path, int]:
    """Index every WARC file of ``crawl_dir`` into ``out`` (default ``DIR/indexes/index.cdxj``),
    replacing it atomically. ``extra``: fields to add to the capture of each (file name, offset)
    (``raycrawl warc cc-index``: its charset, languages and WET/WAT records). Returns (path, lines)."""
    files = warc_files(layout(crawl_dir).warc)
    if not files:
        raise UserError(f"no WARC files in {layout(crawl_dir).warc}")
    target = Path(out) if out else layout(crawl_dir).indexes / INDEX_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = sorted(line for path in files for line in file_lines(path, include_not_modified))
    if extra:
        lines = [_with(line, extra) for line in lines]
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(target)
    return target, len(lines)


def _with(line: str, extra: dict[tuple[str, int], dict[str, str]]) -> str:
    key, stamp, body = line.split(" ", 2)
    fields = json.loads(body)
    more = extra.get((fields.get("filename", ""), int(fields.get("offset", -1))))
    if not more:
        return line
    return f"{key} {stamp} {json.dumps({**fields, **more}, ensure_ascii=False)}\n"
