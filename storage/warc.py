"""WARC store: every exchange as WARC/1.1 records, one gzip member per record, rotated files.

Layout: ``WARC_DIR/PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz``, Heritrix's pattern (PREFIX is the
writer, e.g. ``agent0``, TIMESTAMP the file's opening in UTC to the millisecond, SERIAL the writer's
file count), so the files of many crawls can share one pywb collection without a name clash. Each
file starts with a ``warcinfo`` record saying what an archivist must know (software and version,
operator, user agent, robots policy, the crawl's settings: ``warc_info``); each fetch adds a
``request`` record and then a ``response`` record. The archive never claims
what is not true of its bytes: a ``revisit`` record (HTTP headers only, profile
``identical-payload-digest``, pointing at the original URL and date) is written only for a payload
byte-identical to the one referred to — ``write`` checks the SHA-1 and refuses otherwise. A
``304 Not Modified`` answer to a periodic crawl's conditional GET is a ``revisit`` with profile
``server-not-modified`` (WARC 1.1 §6.7.3): the server's 304 head, the capture it revalidated
(``WARC-Refers-To-*``), and no payload digest — the crawler holds no payload to vouch for. A page the
crawler found to duplicate another by its visible text or by MinHash keeps its full ``response``
record, marked with the extension fields ``Raycrawl-Duplicate-Of`` (the representative's URL) and
``Raycrawl-Duplicate-Kind`` (``exact`` or ``near``). ``write`` returns the file name and byte offset
of the response/revisit record, which is what the link records store to find a page again.

Records carry ``WARC-IP-Address``, ``WARC-Block-Digest`` and ``WARC-Payload-Digest`` (SHA-1,
base32), ``WARC-Concurrent-To`` linking request and response, and ``WARC-Truncated`` when the body is not
whole: ``length`` (cut by a size cap), ``disconnect`` (the server closed or reset the connection
before the end it announced) or ``time`` (a timeout mid-body); the bytes that arrived are kept. The body stored is the *decoded* one (the fetcher removes the
Content-Encoding), so the wire headers that no longer describe it are renamed
``X-Crawler-Content-Encoding`` / ``X-Crawler-Transfer-Encoding`` / ``X-Crawler-Content-Length``
and a correct ``Content-Length`` is added — the convention of wget and warcio for decoded payloads.

Each record is its own gzip member (zlib, one member per record), so warcio,
fastwarc and any gzip-member-aware tool can seek to an offset; a ``kill -9`` leaves at most a torn
last member, which readers here skip with a warning. A restarted store opens a new file.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import re
import socket
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

from raycrawl import durable
from raycrawl.exchange import FetchResult
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)
# zlib's default (Heritrix's too); level 9 took 27 % more time per record for 1 % less size on
# crawled pages (benchmarks/RESULTS.md, issue 16).
GZIP_LEVEL = 6

SUFFIX = ".warc.gz"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
DUPLICATE_OF = "Raycrawl-Duplicate-Of"
# On the records of a robots.txt fetch (robots.txt, or a redirect it followed: RFC 9309 §2.3.1.2),
# whatever their URL: no page of the crawl (no WET text; Common Crawl's robotstxt subset).
FETCHED_FOR = "Raycrawl-Fetched-For"
ROBOTS_TXT = "robots.txt"
REDACTED_HEADERS = "Raycrawl-Redacted"  # a request record's headers whose values it shows as ***
DOM_URI = "urn:dom:"  # + URL: the WARC resource record of the DOM a browser rendered (write_rendered)


def fetched_for_robots(rec: WarcRecord) -> bool:
    """A record of a robots.txt fetch: marked so (:data:`FETCHED_FOR`), or, in archives written
    before the mark, by its URL alone."""
    return (rec.headers.get(FETCHED_FOR) == ROBOTS_TXT
            or urlsplit(rec.headers.get("WARC-Target-URI") or "").path == "/robots.txt")


class Response(NamedTuple):
    """A response record read back: its target URI, its HTTP headers, its payload."""

    url: str
    headers: dict[str, str]
    body: bytes


class Located(NamedTuple):
    """A record read in a directory of WARC files: the file's name, the record's offset in it, the record."""

    file: str
    offset: int
    record: WarcRecord


class Revisit(NamedTuple):
    """The capture a ``revisit`` record refers to: its URL, its WARC-Date, and its payload digest
    (``identical-payload-digest``) or None (``server-not-modified``: a 304 to a conditional GET)."""

    url: str
    date: str
    digest: str | None
DUPLICATE_KIND = "Raycrawl-Duplicate-Kind"
_RENAMED = {b"content-encoding": b"X-Crawler-Content-Encoding", b"transfer-encoding": b"X-Crawler-Transfer-Encoding",
            b"content-length": b"X-Crawler-Content-Length"}


def warc_name(prefix: str, serial: int, when: float | None = None) -> str:
    """``PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz`` (Heritrix 3's default template)."""
    stamp = datetime.fromtimestamp(time.time() if when is None else when, UTC).strftime("%Y%m%d%H%M%S%f")[:17]
    host = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "localhost"
    return f"{prefix}-{stamp}-{serial:05d}-{os.getpid()}~{host}{SUFFIX}"


def next_serial(warc_dir: Path, prefix: str) -> int:
    """One more than the highest serial among ``prefix``'s files (named as above, or
    ``PREFIX-SERIAL.warc.gz`` as crawls before Heritrix names were)."""
    serials = [-1]
    for path in warc_dir.glob(f"{prefix}-*{SUFFIX}"):
        parts = path.name[len(prefix) + 1 : -len(SUFFIX)].split("-")
        field = parts[1] if len(parts) >= 3 and len(parts[0]) == 17 else parts[0]
        if field.isdigit():
            serials.append(int(field))
    return max(serials) + 1


def base_info() -> dict[str, str]:
    """The warcinfo fields every file gets (the writer adds the crawl's own: ``warc_info``)."""
    import fastwarc

    from raycrawl import __version__

    return {"software": f"raycrawl/{__version__} (fastwarc/{getattr(fastwarc, '__version__', '?')}; "
                        f"Python/{sys.version.split()[0]})",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "hostname": socket.gethostname()}


def warc_info(settings: Any, crawl: str) -> dict[str, str]:
    """A crawl's warcinfo fields: who ran it, as whom, under which robots policy and settings."""
    values = settings.to_dict()  # credentials redacted: WARC files are what archives publish
    return {"operator": settings.operator, "isPartOf": crawl,
            "description": f"raycrawl crawl {crawl}" + (" (periodic pass)" if settings.revisit else ""),
            "http-header-user-agent": settings.user_agent,
            "robots": "obey (RFC 9309; Crawl-delay honoured up to max_crawl_delay)",
            "raycrawl-settings": json.dumps(values, sort_keys=True, default=str)}


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def warc_date(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def new_record(rtype: WarcRecordType, block: bytes, headers: dict[str, str], http: bool = True,
               record_id: str | None = None) -> WarcRecord:
    """A record of ``block`` (its ``WARC-Block-Digest`` added unless ``headers`` has one)."""
    rec = WarcRecord()
    rec.init_headers(rtype, (record_id or _record_id())[5:-1].encode("ascii"))
    rec.set_bytes_content(block)
    rec.is_http = http
    headers.setdefault("WARC-Block-Digest", sha1_b32(block))
    for key, value in headers.items():
        rec.headers[key] = value
    return rec


def warcinfo_record(info: dict[str, str], filename: str, record_id: str | None = None) -> WarcRecord:
    """The ``warcinfo`` record that opens the file ``filename``: ``info``'s non-empty fields."""
    fields = "".join(f"{k}: {v}\r\n" for k, v in info.items() if v)
    return new_record(WarcRecordType.warcinfo, fields.encode("utf-8"),
                      {"WARC-Filename": filename, "Content-Type": "application/warc-fields"}, http=False,
                      record_id=record_id)


def gzip_member(rec: WarcRecord) -> bytes:
    """``rec`` as a gzip member of its own (what lets a reader seek to its offset)."""
    # zlib, not fastwarc's GzipWriter: a GzipWriter per record cost 0.19 ms to set up, whatever
    # the record, and a page's write 0.27 ms against 0.11 ms so (same records, measured).
    buf = io.BytesIO()
    rec.write(buf)
    gz = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    return gz.compress(buf.getvalue()) + gz.flush()


def write_records(out: Path, info: dict[str, str], records: Iterable[tuple[str, WarcRecord]]) -> dict[str, tuple[int, int]]:
    """A WARC file ``out`` of a ``warcinfo`` record of ``info`` then ``records`` (keyed), each its
    own gzip member, written whole and then renamed into place: {key: (offset, length)}."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    placed: dict[str, tuple[int, int]] = {}
    with open(tmp, "wb") as fh:
        fh.write(gzip_member(warcinfo_record(info, out.name)))
        for key, rec in records:
            data = gzip_member(rec)
            placed[key] = (fh.tell(), len(data))
            fh.write(data)
    tmp.replace(out)
    return placed


def derived_path(warc: Path, out_dir: Path, suffix: str) -> Path:
    """The file of ``out_dir`` derived from the WARC file ``warc``: its name with ``suffix``
    for ``.warc.gz`` (Common Crawl's ``NAME.warc.wet.gz`` beside ``NAME.warc.gz``)."""
    name = warc.name[: -len(SUFFIX)] if warc.name.endswith(SUFFIX) else warc.stem
    return out_dir / f"{name}{suffix}"


def response_head(fr: FetchResult) -> bytes:
    """The HTTP response head as stored: status line, headers (wire-encoding ones renamed), CRLF CRLF."""
    lines = [(fr.status_line or f"HTTP/1.1 {fr.status}").encode("latin-1", "replace")]
    for name, value in fr.raw_headers:
        renamed = _RENAMED.get(name.lower())
        lines.append((renamed or name) + b": " + value)
    lines.append(f"Content-Length: {len(fr.body)}".encode("ascii"))
    return b"\r\n".join(lines) + b"\r\n\r\n"


class WarcStore:
    """Appends exchanges to rotated ``.warc.gz`` files. Not thread-safe: one per writer."""

    def __init__(self, warc_dir: str | Path, prefix: str, max_file_bytes: int = 1 << 30, *,
                 info: dict[str, str] | None = None, on_closed: Callable[[Path], None] | None = None) -> None:
        """``on_closed(path)`` is called with each file once it is complete (rotated or closed)."""
        assert max_file_bytes > 0 and "/" not in prefix
        self.on_closed = on_closed
        self.dir = Path(warc_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_file_bytes = max_file_bytes
        self.info = {**base_info(), **(info or {})}
        # Never append after a possibly torn tail left by a kill: resume in a fresh file.
        self.serial = next_serial(self.dir, prefix)
        self.name = ""
        self._file: io.BufferedWriter | None = None
        self._warcinfo_id = ""
        self._new_name = False  # a file made since the last sync: its directory is synced too
        self.records = 0
        self.bytes = 0

    def _open(self) -> io.BufferedWriter:
        if self._file is not None and self._file.tell() >= self.max_file_bytes:
            self.close()
        if self._file is None:
            self.name = warc_name(self.prefix, self.serial)
            self._file = open(self.dir / self.name, "xb")  # noqa: SIM115 - kept open across writes
            self._new_name = True
            self._warcinfo_id = _record_id()
            self._emit(warcinfo_record(self.info, self.name, self._warcinfo_id))
        return self._file

    def _emit(self, rec: WarcRecord) -> int:
        """Write one record as its own gzip member; its offset in the current file."""
        assert self._file is not None
        data = gzip_member(rec)
        offset = self._file.tell()
        self._file.write(data)
        self.records += 1
        self.bytes += len(data)
        return offset

    def write(self, fr: FetchResult, revisit_of: Revisit | None = None,
              duplicate_of: tuple[str, str] | None = None, robots: bool = False) -> tuple[str, int]:
        """Store the exchange ``fr`` (which must have a response: ``fr.status > 0``).

        ``revisit_of`` = (original URL, original WARC-Date, original payload digest) stores a
        revisit record instead of the full response; ValueError unless ``fr.body`` has that very
        digest (and is not truncated). With digest None it is a 304's server-not-modified revisit
        (ValueError unless ``fr`` is a 304). ``duplicate_of`` = (representative URL, "exact" | "near")
        marks a full response as a crawl-time duplicate; ``robots``: the exchange is a request of a
        robots.txt fetch (its records say so, :data:`FETCHED_FOR`). Returns (file name, offset of the
        response/revisit record). The bytes are handed to the OS before returning (a process crash
        loses nothing written); :meth:`sync` puts them on disk.
        """
        if fr.status <= 0:
            raise ValueError(f"no response to store for {fr.url} (error {fr.error})")
        payload_digest = sha1_b32(fr.body)
        not_modified = revisit_of is not None and revisit_of[2] is None
        if not_modified and fr.status != 304:
            raise ValueError(f"not-modified revisit of {revisit_of[0]} refused for {fr.url}: the answer is {fr.status}")
        if revisit_of is not None and not not_modified and (revisit_of[2] != payload_digest or fr.truncated):
            raise ValueError(f"revisit of {revisit_of[0]} refused for {fr.url}: payload not byte-identical")
        f = self._open()
        date = warc_date(fr.ended or fr.started)
        head = response_head(fr)
        response_id = _record_id()
        common = {"WARC-Target-URI": fr.url, "WARC-Date": date, "WARC-Warcinfo-ID": self._warcinfo_id,
                  **({FETCHED_FOR: ROBOTS_TXT} if robots else {})}
        if fr.ip:
            common["WARC-IP-Address"] = fr.ip
        request = new_record(WarcRecordType.request, fr.request_head or f"GET {fr.url} HTTP/1.1\r\n\r\n".encode(),
                               {**common, "WARC-Concurrent-To": response_id,
                                # (the secret values the block shows as ***: core/site_sessions.py)
                                **({REDACTED_HEADERS: ", ".join(fr.redacted)} if fr.redacted else {})})
        self._emit(request)
        if revisit_of is None:
            block = head + fr.body
            headers = {**common, "WARC-Payload-Digest": payload_digest}
            if fr.truncated:
                headers["WARC-Truncated"] = fr.truncated  # WARC 1.1 §5.13: length, time or disconnect
            if duplicate_of is not None:
                headers[DUPLICATE_OF], headers[DUPLICATE_KIND] = duplicate_of
            rec = new_record(WarcRecordType.response, block, headers, record_id=response_id)
        else:
            original_url, original_date, _ = revisit_of
            headers = {**common, "WARC-Profile": NOT_MODIFIED_PROFILE if not_modified else REVISIT_PROFILE,
                       "WARC-Refers-To-Target-URI": original_url, "WARC-Refers-To-Date": original_date}
            if not not_modified:
                headers["WARC-Payload-Digest"] = payload_digest
            rec = new_record(WarcRecordType.revisit, head, headers, record_id=response_id)
        offset = self._emit(rec)
        f.flush()
        return self.name, offset

    def write_rendered(self, url: str, dom: bytes, when: float, screenshot: bytes = b"") -> tuple[str, int]:
        """Store the DOM of ``url`` as a browser rendered it (actors/visit/stages/render.py): a
        ``resource`` record ``urn:dom:URL`` (as Browsertrix names its ``urn:text:``/``urn:view:``
        records), so a replay of ``url`` still serves the response the server sent, and the
        rendered DOM is there beside it; and a ``urn:screenshot:URL`` PNG when given. Returns
        (file name, offset) of the DOM's record."""
        self._open()
        common = {"WARC-Date": warc_date(when), "WARC-Warcinfo-ID": self._warcinfo_id, "WARC-Refers-To-Target-URI": url}
        headers = {"WARC-Target-URI": DOM_URI + url, **common, "Content-Type": "text/html; charset=utf-8",
                   "WARC-Payload-Digest": sha1_b32(dom)}
        offset = self._emit(new_record(WarcRecordType.resource, dom, headers, http=False))
        if screenshot:
            self._emit(new_record(WarcRecordType.resource, screenshot, {
                "WARC-Target-URI": f"urn:screenshot:{url}", **common, "Content-Type": "image/png",
                "WARC-Payload-Digest": sha1_b32(screenshot)}, http=False))
        self._file.flush()
        return self.name, offset

    def sync(self) -> None:
        """Make every record written so far durable (core/durable.py): ``write`` only hands
        them to the OS, which a kill of the process survives but not a crash of the machine."""
        if self._file is not None:
            durable.sync_file(self._file)
        if self._new_name:
            durable.sync_dir(self.dir)
            self._new_name = False

    def close(self) -> None:
        """Complete the file in progress (if any); the next record starts a new one."""
        if self._file is not None:
            durable.sync_file(self._file)  # (a rotation: the batch's sync only reaches the next file)
            self._file.close()
            self._file = None
            self.serial += 1
            if self.on_closed is not None:
                self.on_closed(self.dir / self.name)


def warc_files(warc_dir: str | Path) -> list[Path]:
    """The WARC files of a directory: the crawler's (``.warc.gz``) and uncompressed ones (``.warc``,
    as other tools write them), in name order."""
    d = Path(warc_dir)
    return sorted([*d.glob(f"*{SUFFIX}"), *d.glob("*.warc")])


_GZIP_MAGIC = b"\x1f\x8b\x08"


def iter_records(warc_dir: str | Path, types: WarcRecordType = WarcRecordType.response) -> Iterator[Located]:
    """(file name, offset, record) for every record of ``types``, files in name order, HTTP parsed.

    Damage does not cost the rest of a file: reading resumes at the next gzip member after it
    (each record is its own member), with a warning; a torn tail (a crawl killed mid-write) just
    ends the file. The records yielded are streamed: read each one before taking the next.
    """
    for path in warc_files(warc_dir):
        yield from iter_file(path, types)


def iter_file(path: Path, types: WarcRecordType) -> Iterator[Located]:
    """:func:`iter_records` of one file."""
    import mmap

    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = 0
        while True:
            f.seek(start)
            last = start
            try:
                for rec in ArchiveIterator(f, record_types=types, parse_http=True):
                    last = start + rec.stream_pos
                    yield Located(path.name, last, rec)
                return
            except (OSError, ValueError) as e:
                resume = data.find(_GZIP_MAGIC, max(last, start) + 1)
                log.warning("%s: damaged record after offset %d (%s); %s", path, max(last, start), e,
                            f"resuming at {resume}" if resume >= 0 else "rest of the file skipped")
                if resume < 0:
                    return
                start = resume


def iter_responses(warc_dir: str | Path, duplicates: bool = False) -> Iterator[Response]:
    """(url, HTTP headers with lower-case names, body) of every complete stored response, in crawl
    order. A response whose body is shorter than its Content-Length (torn by a kill) is skipped;
    so are the responses marked as crawl-time duplicates unless ``duplicates`` (the analytics
    count a page's text once; the link records say which page each duplicate repeats)."""
    for name, offset, rec in iter_records(warc_dir, WarcRecordType.response):
        if not duplicates and rec.headers.get(DUPLICATE_OF):
            continue
        headers: dict[str, str] = {}
        for key, value in (rec.http_headers.astuples() if rec.http_headers is not None else []):
            key = key.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        body = rec.reader.read()
        if torn(name, offset, rec, headers.get("content-length", ""), body):
            continue
        yield Response(rec.headers.get("WARC-Target-URI", ""), headers, body)


def torn(name: str, offset: int, rec: WarcRecord, declared: str, body: bytes) -> bool:
    """A response body shorter (or longer) than its Content-Length ``declared``: torn by a kill;
    warned about, for the reader to skip."""
    if declared.isdigit() and int(declared) != len(body):
        log.warning("%s@%d: torn response for %s (%d of %s body bytes) skipped", name, offset,
                    rec.headers.get("WARC-Target-URI", ""), len(body), declared)
        return True
    return False


def read_record_at(warc_dir: str | Path, name: str, offset: int) -> Response:
    """(url, HTTP headers, body) of the response/revisit record at ``offset`` of file ``name``
    (the pair ``WarcStore.write`` returned); a revisit has an empty body."""
    with open(Path(warc_dir) / name, "rb") as f:
        f.seek(offset)
        for rec in ArchiveIterator(f, parse_http=True):
            headers = {k.lower(): v for k, v in (rec.http_headers.astuples() if rec.http_headers else [])}
            return Response(rec.headers.get("WARC-Target-URI", ""), headers, rec.reader.read())
    raise ValueError(f"no WARC record at {name}:{offset}")


def demo_stage(crawl_dir: str | Path) -> str:
    """A short account of ``CRAWL_DIR/warc``: files, records by type, bytes, and block digests
    re-verified with fastwarc (what ``raycrawl demo`` prints for the store)."""
    from collections import Counter

    warc_dir = layout(Path(crawl_dir)).warc
    files = warc_files(warc_dir)
    if not files:
        return f"no WARC files in {warc_dir}"
    kinds: Counter[str] = Counter()
    checked = bad = 0
    hosts: set[str] = set()
    for path in files:
        with open(path, "rb") as f:
            try:
                for rec in ArchiveIterator(f, parse_http=False):
                    kinds[str(rec.record_type)] += 1
                    checked += 1
                    bad += not rec.verify_block_digest()
                    if rec.record_type == WarcRecordType.response:
                        hosts.add(urlsplit(rec.headers.get("WARC-Target-URI", "")).netloc)
            except (OSError, ValueError) as e:
                kinds["unreadable tail"] += 1
                log.warning("%s: unreadable tail (%s)", path, e)
    size = sum(p.stat().st_size for p in files)
    by_type = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    return (f"WARC: {len(files)} file(s), {size / 1e6:.2f} MB in {warc_dir}\n"
            f"  records: {by_type}\n"
            f"  responses from {len(hosts)} hosts; block digests re-verified with fastwarc: "
            f"{checked - bad}/{checked} ok")
