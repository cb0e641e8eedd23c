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

import heapq
import json
import os
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


RECORD_BUDGET = 250_000
"""How many records, or links, the derivation holds in memory at once: past it they wait in
``$TMPDIR`` (``raycrawl log`` then peaks at ~80 MB for 300k or 1M pages: benchmarks/crawl_log_memory.py)."""

_REC = np.dtype([("h", "<i8"), ("t", "<f8"), ("i", "<i8")])  # a record: URL hash, time, position
_LINK = np.dtype([("h", "<i8"), ("t", "<f8"), ("k", "<i8")])  # a link: target hash, linker time, 4·linker + hop
_RUN = np.dtype([("t", "<f8"), ("i", "<i8")])  # fetch-time order, a sorted run at a time
_I8 = np.dtype("<i8")


class _Table:
    """An append-only file of fixed-width rows, written a chunk at a time and read back by slices."""

    def __init__(self, path: Path, dtype: np.dtype) -> None:
        self.path, self.dtype, self.rows = path, dtype, 0
        path.touch()

    def append(self, rows: np.ndarray) -> None:
        with open(self.path, "ab") as f:
            rows.astype(self.dtype, copy=False).tofile(f)
        self.rows += len(rows)

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        for start in range(0, self.rows, size):
            yield np.fromfile(self.path, self.dtype, min(size, self.rows - start), offset=start * self.dtype.itemsize)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)


class _Derivation:
    """The records of a crawl in fetch-time order with each URL's via and discovery path, in memory
    bounded by ``budget`` records or links whatever the crawl's size: the work is spread over files
    in ``work`` (``$TMPDIR``).

    1. One pass over the link records writes each record (without its links) to ``records.bin``
       (found by its position through ``offsets.bin``), its (URL hash, time, position) to one table
       and every link's (target hash, linker's time, linker) to another; the (time, position) pairs
       leave in sorted runs of ``budget``.
    2. Both tables are split by hash into as many buckets as keep each near ``budget`` rows (of the
       links to a URL, each chunk passes on only the earliest): the records of a URL and the links
       to it meet in one bucket, which gives each of its records the
       via of its URL (the earliest linker fetched before the URL's first fetch), written to
       ``vias.bin`` at the record's position.
    3. The rows come from a merge of the runs, each record and its via read back by position; a
       discovery path walks the vias back to a seed, the paths last walked kept in a bounded LRU.

    "Record order" is the order of the files' names, then of the records in a file; ties in time
    keep it. URLs are their 64-bit hashes (Python's SipHash, within one process): a collision
    between two URLs (odds ~n²/2⁶⁵: 3·10⁻⁶ at 10M URLs) could only give a URL a wrong via."""

    def __init__(self, files: list[tuple[str, Path]], seeds: set[str], work: Path, budget: int) -> None:
        self.files, self.work, self.budget = files, work, max(2, budget)
        self.blobs = open(work / "records.bin", "w+b")  # noqa: SIM115 (closed by close())
        self.offsets = open(work / "offsets.bin", "w+b")  # noqa: SIM115
        self.vias = open(work / "vias.bin", "w+b")  # noqa: SIM115
        self.runs: list[_Table] = []
        recs, links = self._scan(seeds)
        self._find_vias(recs, links)
        self._paths: OrderedDict[int, str] = OrderedDict()

    def _scan(self, seeds: set[str]) -> tuple[_Table, _Table]:
        """Step 1: the records' blobs and offsets, their table and runs, and the links' table."""
        recs, links = _Table(self.work / "records.tab", _REC), _Table(self.work / "links.tab", _LINK)
        h, t, offsets, lh, lt, lk = (array("q"), array("d"), array("q"), array("q"), array("d"), array("q"))
        offset, i = 0, 0

        def flush_records() -> None:
            if not t:
                return
            rows = np.empty(len(t), _REC)
            rows["h"], rows["t"] = np.frombuffer(h, np.int64), np.frombuffer(t, np.float64)
            rows["i"] = np.arange(i - len(t), i)
            recs.append(rows)
            run = rows[["t", "i"]][np.argsort(rows["t"], kind="stable")]  # positions already ascend
            self.runs.append(_Table(self.work / f"run{len(self.runs)}.tab", _RUN))
            self.runs[-1].append(run)
            self.offsets.write(offsets.tobytes())
            del h[:], t[:], offsets[:]

        def flush_links() -> None:
            rows = np.empty(len(lh), _LINK)
            rows["h"], rows["t"], rows["k"] = (np.frombuffer(lh, np.int64), np.frombuffer(lt, np.float64),
                                               np.frombuffer(lk, np.int64))
            links.append(rows)
            del lh[:], lt[:], lk[:]

        for w, (_, path) in enumerate(self.files):
            for rec in read_link_file(path):
                m = rec.to_map()
                m.pop("links", None)
                offsets.append(offset)
                offset += self.blobs.write(msgpack.packb([w, m]))
                h.append(hash(rec.url))
                t.append(rec.time)
                targets = dict.fromkeys(rec.links, 0)
                if rec.redirect:
                    targets.setdefault(rec.redirect, 1)
                for url in rec.embeds:
                    targets.setdefault(url, 2)
                for url, hop in targets.items():
                    if url != rec.url and url not in seeds:  # a seed has no via
                        lh.append(hash(url))
                        lt.append(rec.time)
                        lk.append(4 * i + hop)
                i += 1
                if len(t) >= self.budget:
                    flush_records()
                if len(lh) >= self.budget:
                    flush_links()
        flush_records()
        flush_links()
        self.offsets.write(np.int64(offset).tobytes())
        self.blobs.flush()
        self.offsets.flush()
        return recs, links

    def _find_vias(self, recs: _Table, links: _Table) -> None:
        """Step 2: each record's via (4·linker + hop, or -1) at its position in ``vias.bin``."""
        parts = max(1, -(-max(recs.rows, links.rows) // self.budget))
        buckets = {kind: [_Table(self.work / f"{kind}{b}.tab", table.dtype) for b in range(parts)]
                   for kind, table in (("r", recs), ("l", links))}
        for kind, table in (("r", recs), ("l", links)):
            for chunk in table.chunks(self.budget):
                if kind == "l":
                    chunk = _earliest_per_target(chunk)
                bucket = chunk["h"].view(np.uint64) % np.uint64(parts)
                order = np.argsort(bucket, kind="stable")
                bounds = np.searchsorted(bucket[order], np.arange(parts + 1))
                for b in range(parts):
                    if bounds[b] < bounds[b + 1]:
                        buckets[kind][b].append(chunk[order[bounds[b]:bounds[b + 1]]])
            table.drop()
        for r, lk in zip(buckets["r"], buckets["l"], strict=True):
            rows = np.fromfile(r.path, _REC)
            found = np.fromfile(lk.path, _LINK)
            r.drop()
            lk.drop()
            if not len(rows):
                continue
            first = np.lexsort((rows["i"], rows["t"], rows["h"]))
            h = rows["h"][first]
            head = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
            urls, fetched = h[head], rows["t"][first][head]  # each URL of the bucket and its first fetch time
            u = np.minimum(np.searchsorted(urls, found["h"]), len(urls) - 1)
            best = _earliest_per_target(found[(urls[u] == found["h"]) & (fetched[u] > found["t"])])
            via = np.full(len(urls), -1, np.int64)
            via[np.searchsorted(urls, best["h"])] = best["k"]
            mine = via[np.searchsorted(urls, rows["h"])]
            for i, v in zip(rows["i"].tolist(), mine.tolist(), strict=True):
                os.pwrite(self.vias.fileno(), _pack(v), 8 * i)

    def _via(self, i: int) -> int:
        return int.from_bytes(os.pread(self.vias.fileno(), 8, 8 * i), "little", signed=True)

    def record(self, i: int) -> tuple[int, LinkRecord]:
        """The record at position ``i`` and the index of the file it came from."""
        start, end = np.frombuffer(os.pread(self.offsets.fileno(), 16, 8 * i), _I8)
        w, m = msgpack.unpackb(os.pread(self.blobs.fileno(), int(end - start), int(start)))
        rec = LinkRecord.from_map(m)
        assert rec is not None
        return w, rec

    def path(self, i: int) -> str:
        """The discovery path of record ``i``'s URL (``L``/``R``/``E`` per hop from a seed): walked
        up the vias to a record whose path is known, the paths last found kept in a bounded cache
        (a crawl's recent pages are the next pages' vias). A via is always fetched strictly
        earlier, so a walk ends."""
        chain, r = [], i
        while r not in self._paths:
            v = self._via(r)
            if v < 0:
                self._paths[r] = ""
                break
            chain.append((r, v & 3))
            r = v >> 2
        path = self._paths[r]
        for r, hop in reversed(chain):
            path += "LRE"[hop]
            self._paths[r] = path
        while len(self._paths) > 50_000:
            self._paths.popitem(last=False)
        return path

    def rows(self) -> Iterator[dict[str, Any]]:
        for _, i in heapq.merge(*(_run_pairs(run) for run in self.runs)):
            w, rec = self.record(i)
            v = self._via(i)
            via = self.record(v >> 2)[1].url if v >= 0 else None
            yield _row(rec, self.files[w][0], self.path(i) if via else "", via)

    def close(self) -> None:
        for f in (self.blobs, self.offsets, self.vias):
            f.close()


def _earliest_per_target(links: np.ndarray) -> np.ndarray:
    """Of the links to each target, the earliest by (linker's time, linker, hop): the only one that
    can be its via (a later linker fetched before the target was, so was this one). It keeps a URL
    every page links to from filling one bucket with a row per page."""
    order = np.lexsort((links["k"], links["t"], links["h"]))
    h = links["h"][order]
    return links[order[np.r_[True, h[1:] != h[:-1]]]] if len(h) else links


def _pack(v: int) -> bytes:
    return v.to_bytes(8, "little", signed=True)


def _run_pairs(run: _Table, chunk: int = 8192) -> Iterator[tuple[float, int]]:
    for rows in run.chunks(chunk):
        yield from zip(rows["t"].tolist(), rows["i"].tolist(), strict=True)


def rows(crawl_dir: str | Path, budget: int = RECORD_BUDGET, seeds: set[str] | None = None
         ) -> Iterator[dict[str, Any]]:
    """One dict per link record (columns ``COLUMNS``), in fetch time order. ``seeds``: the crawl's
    seed URLs when the caller knows them (None: read from its first WARC file, :func:`crawl_seeds`).

    Memory is bounded by ``budget`` (:class:`_Derivation`); ``$TMPDIR`` holds at most 48 bytes per
    link and the records without their links while it works."""
    out = layout(crawl_dir).out
    with tempfile.TemporaryDirectory(prefix="raycrawl-log-") as work:
        derivation = _Derivation(_files(out), crawl_seeds(out) if seeds is None else seeds, Path(work), budget)
        try:
            yield from derivation.rows()
        finally:
            derivation.close()


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


def write_lines(crawl_dir: str | Path, f: TextIO, fmt: str, seeds: set[str] | None = None) -> int:
    """Write the log to ``f`` as ``heritrix`` lines or a ``tsv`` table with a header; returns rows written."""
    if fmt == "tsv":
        f.write("\t".join(COLUMNS) + "\n")
    line = heritrix_line if fmt == "heritrix" else tsv_line
    n = 0
    for row in rows(crawl_dir, seeds=seeds):
        f.write(line(row) + "\n")
        n += 1
    return n


def write_text(crawl_dir: str | Path, out: Path, fmt: str, seeds: set[str] | None = None) -> int:
    """:func:`write_lines` into the file ``out``, replaced atomically."""
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        n = write_lines(crawl_dir, f, fmt, seeds)
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
