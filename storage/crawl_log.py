"""The crawl log: one line per URL the crawl visited, as Heritrix writes its ``crawl.log``, derived
from the link records (which stay the internal format) — for people whose tools read Heritrix logs,
and, as a table (TSV, parquet), for duckdb and pandas.

Heritrix's columns, in order (docs/archiving.md has the table): log time, fetch status, size, URL,
discovery path, via, MIME type, worker, fetch time, digest, source tag, annotations, and a JSON
"extra info" with ``warcFilename``/``warcFileOffset`` (as Heritrix 3's extraInfo) and what
raycrawl adds (``duplicateOf``, ``revisitOf``, ``epoch``, ``error``). Errors get Heritrix's
negative status codes (``-6`` DNS, ``-2`` connect, ``-4`` timeout, ``-9998`` robots, …); the HTTP
status stays in the table as ``http_status``.

The link records do not carry who discovered a URL, so ``via`` is reconstructed: the page fetched
earliest among those linking to it (or redirecting to it: ``R``), provided it was fetched before
it; a seed has none (discovery path ``-``; the seeds are read from the file the crawl's settings,
stored in each WARC file's warcinfo record, name). The discovery path follows ``via``s back to
a seed, one letter per hop (``L`` link, ``R`` redirect), as Heritrix's does. For a one-agent crawl
this is the page whose parse first queued the URL, up to the order of a batch; with several agents
it is the earliest linking page in time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import LINKS_SUBDIR, SUFFIX, read_link_file

# Heritrix's FetchStatusCodes for the error kinds of the link records (docs/archiving.md has the
# table). A DNS failure is -6 ("prerequisite domain-lookup failed"), as Heritrix logs the URLs of a
# host that does not resolve (its -1 goes to the dns: record, which raycrawl does not write).
HERITRIX_CODES = {"dns": -6, "connect": -2, "reset": -3, "timeout": -4, "robots": -9998, "robots-unavailable": -61,
                  "forbidden-network": -5000, "filtered": -5000, "spam": -5002,
                  "blocked": -5001, "operator-scope": -5000, "budget": -5003, "too-large": -5, "bomb": -5,
                  "bad-content": -5, "bad-url": -7, "tls": -2, "bad-response": -5, "bad-encoding": -5}
# A response whose body ended early (the connection was lost, or timed out, mid-body) is a failed
# fetch, whatever its status line said: its code, and Heritrix's truncation annotation.
CUT_SHORT = {"reset": "disconnectTrunc", "timeout": "timeTrunc"}
COLUMNS = ("time", "status", "size", "url", "discovery_path", "via", "mime", "worker", "fetch_time", "fetch_ms", "digest",
           "source", "annotations", "warc_filename", "warc_offset", "duplicate_of", "duplicate_kind", "revisit_of",
           "http_status", "error", "epoch", "title")


def _stamp(t: float, sep: bool) -> str:
    d = datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if sep else d.strftime("%Y%m%d%H%M%S%f")[:-3]


def _records(crawl_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((crawl_dir / LINKS_SUBDIR).glob(f"*{SUFFIX}")):
        worker = path.name[: -len(SUFFIX)].rsplit("-", 1)[0]
        out.extend((worker, rec) for rec in read_link_file(path))
    out.sort(key=lambda wr: wr[1].time)
    return out


def crawl_seeds(crawl_dir: Path) -> set[str]:
    """The crawl's seed URLs: the ``seeds`` file named in the settings of its first WARC file's
    warcinfo record (empty when that file is gone)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from raycrawl.errors import UserError
    from raycrawl.seeds import read_seeds
    from raycrawl.storage.warc import warc_files

    files = warc_files(layout(crawl_dir).warc)
    if not files:
        return set()
    with open(files[0], "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.warcinfo):
            for line in rec.reader.read().decode("utf-8", "replace").splitlines():
                if line.startswith("raycrawl-settings: "):
                    seeds = json.loads(line.split(": ", 1)[1]).get("seeds")
                    try:
                        return set(read_seeds(seeds)) if seeds else set()
                    except (UserError, OSError):
                        return set()
            break
    return set()


def _discovery(records: list[tuple[str, dict[str, Any]]], seeds: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(via, hop letter) of every URL that has a discoverer (see the module doc)."""
    fetched = {}
    for _, rec in records:
        fetched.setdefault(rec.url, rec.time)
    via: dict[str, str] = {}
    hop: dict[str, str] = {}
    for _, rec in records:  # in time order: the first linker seen is the earliest
        t = rec.time
        targets = [(u, "L") for u in rec.links]
        if rec.redirect:
            targets.append((rec.redirect, "R"))
        for url, letter in targets:
            if url not in via and url not in seeds and url != rec.url and fetched.get(url, math.inf) > t:
                via[url], hop[url] = rec.url, letter
    return via, hop


def _path(url: str, via: dict[str, str], hop: dict[str, str], memo: dict[str, str]) -> str:
    chain = []
    while url in via and url not in memo:
        chain.append(url)
        url = via[url]
    path = memo.get(url, "")
    for u in reversed(chain):
        path += hop[u]
        memo[u] = path
    return path


def rows(crawl_dir: str | Path) -> Iterator[dict[str, Any]]:
    """One dict per link record (columns ``COLUMNS``), in fetch time order."""
    records = _records(layout(crawl_dir).out)
    via, hop = _discovery(records, crawl_seeds(layout(crawl_dir).out))
    memo: dict[str, str] = {}
    for worker, rec in records:
        t = rec.time
        http = rec.status
        err = rec.error
        status = http if http and err not in CUT_SHORT else HERITRIX_CODES.get(err or "", -5)
        warc = rec.warc or (None, None)
        notes = []
        if rec.dup_of:
            notes.append(f"duplicate:{rec.dup_kind or 'exact'}")
        if rec.revisit_of:
            notes.append("warcRevisit:" + ("notModified" if http == 304 else "digest"))
        if err and http:
            notes.append(CUT_SHORT.get(err) or ("lenTrunc" if err in ("too-large", "bomb") else f"err={err}"))
        yield {"time": t, "status": status, "size": rec.size, "url": rec.url,
               "discovery_path": _path(rec.url, via, hop, memo), "via": via.get(rec.url),
               "mime": rec.ctype or None, "worker": worker, "fetch_time": rec.started or t,
               "fetch_ms": round((t - rec.started) * 1000) if rec.started else None, "digest": rec.sha1,
               "source": None, "annotations": ",".join(notes) or None, "warc_filename": warc[0],
               "warc_offset": warc[1], "duplicate_of": rec.dup_of, "duplicate_kind": rec.dup_kind,
               "revisit_of": (rec.revisit_of or [None])[0], "http_status": http, "error": err,
               "epoch": rec.epoch, "title": rec.title or None}


def heritrix_line(row: dict[str, Any]) -> str:
    """A row as a Heritrix crawl.log line (space-separated, ``-`` for empty)."""
    extra = {k: v for k, v in (("warcFilename", row["warc_filename"]), ("warcFileOffset", row["warc_offset"]),
                               ("duplicateOf", row["duplicate_of"]), ("revisitOf", row["revisit_of"]),
                               ("epoch", row["epoch"]), ("error", row["error"])) if v is not None}
    fields = [_stamp(row["time"], True), f"{row['status']:>5}", f"{row['size']:>10}", row["url"],
              row["discovery_path"] or "-", row["via"] or "-", row["mime"] or "-", f"#{row['worker']}",
              _stamp(row["fetch_time"], False) + "+" + ("-" if row["fetch_ms"] is None else str(row["fetch_ms"])),
              row["digest"] or "-", "-", row["annotations"] or "-",
              json.dumps(extra, separators=(",", ":"))]
    return " ".join(fields)


def tsv_line(row: dict[str, Any]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return _stamp(v, True)
        return str(v).replace("\t", " ").replace("\n", " ")
    return "\t".join(cell(row[c]) for c in COLUMNS)


def write_lines(crawl_dir: str | Path, f: TextIO, fmt: str) -> int:
    """Write the log to ``f`` as ``heritrix`` lines or a ``tsv`` table with a header; returns rows written."""
    if fmt == "tsv":
        f.write("\t".join(COLUMNS) + "\n")
    line = heritrix_line if fmt == "heritrix" else tsv_line
    n = 0
    for row in rows(crawl_dir):
        f.write(line(row) + "\n")
        n += 1
    return n


def write_text(crawl_dir: str | Path, out: Path, fmt: str) -> int:
    """:func:`write_lines` into the file ``out``, replaced atomically."""
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        n = write_lines(crawl_dir, f, fmt)
    tmp.replace(out)
    return n


def write_parquet(crawl_dir: str | Path, out: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = {c: [] for c in COLUMNS}
    for row in rows(crawl_dir):
        for c in COLUMNS:
            data[c].append(row[c])
    types = {"time": pa.timestamp("ms", tz="UTC"), "fetch_time": pa.timestamp("ms", tz="UTC"), "status": pa.int32(),
             "size": pa.int64(), "warc_offset": pa.int64(), "http_status": pa.int32(), "epoch": pa.int32(),
             "fetch_ms": pa.int64()}
    for c in ("time", "fetch_time"):
        data[c] = [int(t * 1000) for t in data[c]]
    arrays = {c: pa.array(v, types.get(c, pa.string())) for c, v in data.items()}
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(pa.table(arrays), tmp)
    tmp.replace(out)
    return len(data["url"])
