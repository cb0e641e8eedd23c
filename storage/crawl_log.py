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
earliest among those linking to it (or redirecting to it: ``R``; or embedding it as a page
requisite: ``E``), provided it was fetched before it; a seed has none (discovery path ``-``; the seeds are read from the file the crawl's settings,
stored in each WARC file's warcinfo record, name). The discovery path follows ``via``s back to
a seed, one letter per hop (``L`` link, ``R`` redirect, ``E`` embed), as Heritrix's does. For a one-agent crawl
this is the page whose parse first queued the URL, up to the order of a batch; with several agents
it is the earliest linking page in time.
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import msgpack
import numpy as np

from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import LINKS_SUBDIR, SUFFIX, LinkRecord, read_link_file

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


def _files(crawl_dir: Path) -> list[tuple[str, Path]]:
    return [(path.name[: -len(SUFFIX)].rsplit("-", 1)[0], path)
            for path in sorted((crawl_dir / LINKS_SUBDIR).glob(f"*{SUFFIX}"))]


class _Derivation:
    """The records of a crawl in fetch-time order with each URL's via and discovery path, held in
    ~80 bytes per record: the records themselves (without their links) go to a temporary file
    read back by offset, URLs are their 64-bit hashes (Python's SipHash, within one process) in numpy arrays, the links are streamed twice.

    "Record order" is the order of the files' names, then of the records in a file; ties in time
    keep it. A 64-bit hash collision between two URLs (odds ~n²/2⁶⁵: 3·10⁻⁶ at 10M URLs) could
    only give a URL a wrong via."""

    def __init__(self, files: list[tuple[str, Path]], seeds: set[str], work: Path) -> None:
        self.files = files
        self.blobs = open(work / "records.bin", "w+b")  # noqa: SIM115 (closed by rows())
        hashes, times, offsets, workers = array("q"), array("d"), array("q", [0]), array("i")
        for w, (_, path) in enumerate(files):
            for rec in read_link_file(path):
                m = rec.to_map()
                m.pop("links", None)
                offsets.append(offsets[-1] + self.blobs.write(msgpack.packb(m)))
                hashes.append(hash(rec.url))
                times.append(rec.time)
                workers.append(w)
        self.blobs.flush()
        self.n = n = len(times)
        self.offsets = np.frombuffer(offsets, np.int64)
        self.workers = np.frombuffer(workers, np.int32)
        t = np.frombuffer(times, np.float64)
        self.order = np.argsort(t, kind="stable")  # fetch time, then record order
        rank = np.empty(n, np.int64)
        rank[self.order] = np.arange(n)
        self.urls, self.url_of = np.unique(np.frombuffer(hashes, np.int64), return_inverse=True)
        first = np.full(len(self.urls), n, np.int64)
        np.minimum.at(first, self.url_of, rank)
        fetched = t[self.order[first]]  # each URL's first fetch time
        # best linker of each URL as 4·rank + hop (0 link, 1 redirect, 2 embed): the earliest, L R E
        none = 4 * n + 4
        best = np.full(len(self.urls), none, np.int64)
        for th, linker in self._links(files, seeds):
            u = np.minimum(np.searchsorted(self.urls, th), len(self.urls) - 1)
            ok = (self.urls[u] == th) & (fetched[u] > t[linker >> 2])
            np.minimum.at(best, u[ok], 4 * rank[linker[ok] >> 2] + (linker[ok] & 3))
        self.has_via = best < none
        self.via = np.where(self.has_via, self.order[np.minimum(best >> 2, n - 1)] if n else best, -1)
        self.hop = best & 3
        self._paths: OrderedDict[int, str] = OrderedDict()

    @staticmethod
    def _links(files: list[tuple[str, Path]], seeds: set[str], chunk: int = 200_000):
        """(target hashes, 4·linker record + hop (0 link, 1 redirect, 2 embed)) in chunks,
        self-links and links to seeds left out (a seed has no via)."""
        th, linker, i = array("q"), array("q"), 0
        for _, path in files:
            for rec in read_link_file(path):
                targets = dict.fromkeys(rec.links, 0)
                if rec.redirect:
                    targets.setdefault(rec.redirect, 1)
                for url in rec.embeds:
                    targets.setdefault(url, 2)
                for url, hop in targets.items():
                    if url != rec.url and url not in seeds:
                        th.append(hash(url))
                        linker.append(4 * i + hop)
                i += 1
                if len(th) >= chunk:
                    yield np.frombuffer(th, np.int64).copy(), np.frombuffer(linker, np.int64).copy()
                    th, linker = array("q"), array("q")
        if th:
            yield np.frombuffer(th, np.int64), np.frombuffer(linker, np.int64)

    def record(self, i: int) -> LinkRecord:
        self.blobs.seek(int(self.offsets[i]))
        rec = LinkRecord.from_map(msgpack.unpackb(self.blobs.read(int(self.offsets[i + 1] - self.offsets[i]))))
        assert rec is not None
        return rec

    def path(self, u: int) -> str:
        """The discovery path of URL ``u`` (``L``/``R`` per hop from a seed): walked up the vias to
        one already known, the known ones kept in a bounded LRU (a crawl's recent pages are the next
        pages' vias)."""
        chain = []
        while u not in self._paths and self.has_via[u]:
            chain.append(u)
            u = int(self.url_of[self.via[u]])
        path = self._paths.get(u, "")
        for v in reversed(chain):
            path += "LRE"[self.hop[v]]
            self._paths[v] = path
        while len(self._paths) > 50_000:
            self._paths.popitem(last=False)
        return path

    def rows(self) -> Iterator[dict[str, Any]]:
        for i in self.order:
            rec = self.record(int(i))
            u = int(self.url_of[i])
            via = self.record(int(self.via[u])).url if self.has_via[u] else None
            yield _row(rec, self.files[self.workers[i]][0], self.path(u) if via else "", via)


def rows(crawl_dir: str | Path) -> Iterator[dict[str, Any]]:
    """One dict per link record (columns ``COLUMNS``), in fetch time order.

    Memory is about 80 bytes per record, plus a temporary file in ``$TMPDIR`` (the records without
    their links, removed when the rows have been read): benchmarks/crawl_log_memory.py."""
    out = layout(crawl_dir).out
    with tempfile.TemporaryDirectory(prefix="raycrawl-log-") as work:
        derivation = _Derivation(_files(out), crawl_seeds(out), Path(work))
        try:
            yield from derivation.rows()
        finally:
            derivation.blobs.close()


def _row(rec: LinkRecord, worker: str, path: str, via: str | None) -> dict[str, Any]:
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
    return {"time": t, "status": status, "size": rec.size, "url": rec.url,
            "discovery_path": path, "via": via,
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


def write_parquet(crawl_dir: str | Path, out: Path, row_group: int = 100_000) -> int:
    """The log as a parquet table, written a row group at a time (memory bounded by ``row_group``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"time": pa.timestamp("ms", tz="UTC"), "fetch_time": pa.timestamp("ms", tz="UTC"), "status": pa.int32(),
             "size": pa.int64(), "warc_offset": pa.int64(), "http_status": pa.int32(), "epoch": pa.int32(),
             "fetch_ms": pa.int64()}
    schema = pa.schema([(c, types.get(c, pa.string())) for c in COLUMNS])
    data: dict[str, list] = {c: [] for c in COLUMNS}
    n = 0

    def flush(writer: pq.ParquetWriter) -> None:
        for c in ("time", "fetch_time"):
            data[c] = [int(t * 1000) for t in data[c]]
        writer.write_table(pa.table({c: pa.array(v, schema.field(c).type) for c, v in data.items()}, schema=schema))
        for c in COLUMNS:
            data[c] = []

    tmp = out.with_name(out.name + ".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for row in rows(crawl_dir):
            for c in COLUMNS:
                data[c].append(row[c])
            n += 1
            if n % row_group == 0:
                flush(writer)
        flush(writer)
    tmp.replace(out)
    return n
