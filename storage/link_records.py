"""Link records: one compact record per fetched URL, for the graph, summary, dedup and spam stages.

Layout: ``CRAWL_DIR/links/<writer>-<seq:05d>.rec.gz``. Each file is a sequence of gzip members;
each member holds a batch of msgpack maps written back to back, so a ``kill -9`` loses at most
the batch being written and a reader stops cleanly at a truncated tail.

Record fields (msgpack map, str keys; :class:`LinkRecord` in code):

=========== ========== ==========================================================================
key         type       meaning
=========== ========== ==========================================================================
url         str        canonical URL fetched
status      int        HTTP status; 0 when no response (see ``error``)
ctype       str        media type without parameters ("" if none)
time        float      UNIX time the response ended
started     float|nil  UNIX time the request began (nil: not fetched; absent in records before
                       2026-11-24)
ip          str        address dialed ("" if none)
size        int        body bytes received (after decompression)
digest      bytes|nil  16-byte xxh3-128 of the normalised visible text (HTML only)
dup_of      str|nil    representative URL when this page duplicates another
dup_kind    str|nil    "exact" (same digest) or "near" (MinHash Jaccard ≥ threshold)
links       list[str]  canonical out-links in document order (nofollow ones excluded)
embeds      list[str]  canonical page requisites (images, stylesheets, scripts…: core/requisites.py)
                       when the crawl fetches them (``page_requisites``); a stylesheet's url()s
redirect    str|nil    canonical target of a 3xx Location
error       str|nil    error kind: "dns", "connect", "timeout", "reset", "too-large", "bomb",
                       "robots", "filtered", "http-5xx", "bad-content", ...
title       str        <title> text (HTML only, else "")
warc        list|nil   [warc file name, byte offset] of the response or revisit record
canonical   str|nil    the page's ``<link rel=canonical>`` (canonical form), recorded, not followed
epoch       int        the pass of a periodic crawl that fetched it (0: the first crawl; ``raycrawl
                       crawl --revisit`` runs pass 1, 2, …: storage/crawl_epochs.py)
level       int        priority level (front queue) the URL was fetched from: 0 unless the crawl is
                       focused (policies/focus.py)
score       float|nil  the focused crawl's classifier score of the page (nil: not focused, or not
                       parsed)
sha1        str|nil    payload digest of the body received ("sha1:BASE32", as WARC-Payload-Digest;
                       nil: no answer, or a 304)
etag        str|nil    the response's ETag header
modified    str|nil    the response's Last-Modified header
revisit_of  list|nil   [URL, WARC-Date] of the capture its WARC revisit record refers to: a 304 to
                       a conditional GET, a payload byte-identical to the page's last capture, or
                       an exact duplicate's byte-identical payload (nil: a full response record)
=========== ========== ==========================================================================
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import msgpack

from raycrawl import durable
from raycrawl.storage.crawl_dir import PARTS

log = logging.getLogger(__name__)

LINKS_SUBDIR = PARTS["links"]
RENDERED_SUBDIR = PARTS["rendered"]
SUFFIX = ".rec.gz"


@dataclass(slots=True)
class LinkRecord:
    """One fetched (or refused) URL, as the table above says; :meth:`to_map` and
    :meth:`from_map` are the only places its stored form is spelled."""

    url: str
    status: int = 0
    ctype: str = ""
    time: float = 0.0
    started: float | None = None
    ip: str = ""
    size: int = 0
    digest: bytes | None = None
    dup_of: str | None = None
    dup_kind: str | None = None
    links: list[str] = field(default_factory=list)
    embeds: list[str] = field(default_factory=list)
    redirect: str | None = None
    error: str | None = None
    title: str = ""
    warc: tuple[str, int] | None = None
    canonical: str | None = None
    epoch: int = 0
    level: int = 0
    score: float | None = None
    sha1: str | None = None
    etag: str | None = None
    modified: str | None = None
    revisit_of: tuple[str, str] | None = None

    def to_map(self) -> dict[str, Any]:
        m = {name: getattr(self, name) for name in FIELDS}
        if self.warc is not None:
            m["warc"] = list(self.warc)
        if self.revisit_of is not None:
            m["revisit_of"] = list(self.revisit_of)
        return m

    @classmethod
    def from_map(cls, m: object) -> LinkRecord | None:
        """The record a stored map holds, or None for a map that is not one (no URL). Fields
        absent from older records take their defaults; nil numbers read as 0."""
        if not isinstance(m, dict) or not isinstance(url := m.get("url"), str) or not url:
            return None
        warc, ref = m.get("warc"), m.get("revisit_of")
        started = m.get("started")
        return cls(
            url=url, status=int(m.get("status") or 0), ctype=m.get("ctype") or "", time=float(m.get("time") or 0.0),
            started=float(started) if started else None, ip=m.get("ip") or "", size=int(m.get("size") or 0),
            digest=m.get("digest"), dup_of=m.get("dup_of"), dup_kind=m.get("dup_kind"),
            links=[u for u in m.get("links") or () if isinstance(u, str)], redirect=m.get("redirect") or None,
            embeds=[u for u in m.get("embeds") or () if isinstance(u, str)],
            error=m.get("error"), title=m.get("title") or "",
            warc=(str(warc[0]), int(warc[1])) if warc else None, canonical=m.get("canonical"),
            epoch=int(m.get("epoch") or 0), level=int(m.get("level") or 0), score=m.get("score"),
            sha1=m.get("sha1"), etag=m.get("etag"), modified=m.get("modified"),
            revisit_of=(str(ref[0]), str(ref[1])) if ref else None)


FIELDS = tuple(f.name for f in fields(LinkRecord))


class LinkRecordWriter:
    """Appends batches of records; rotates files every ``records_per_file`` records."""

    def __init__(self, crawl_dir: str | Path, writer: str = "agent0", records_per_file: int = 200_000,
                 on_closed: Callable[[Path], None] | None = None, elsewhere: Iterable[str] = (),
                 subdir: str = LINKS_SUBDIR) -> None:
        """``on_closed(path)`` is called with each file once it is complete (rotated or closed);
        ``elsewhere``: names of files of this crawl kept elsewhere (an object store's), which a new
        file's name must not take; ``subdir``: the crawl's part they go to (``links``, or
        ``rendered`` for the records of rendered pages: actors/visit/stages/render.py)."""
        self.on_closed = on_closed
        self.dir = Path(crawl_dir) / subdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.writer = writer
        self.records_per_file = records_per_file
        # On resume, start a new file rather than appending after a possibly torn tail; and after
        # every file of this writer's name, here or in the store (an agent of the same name on
        # another machine, a run ago, wrote some: reusing a name would overwrite its records).
        names = [*(p.name for p in self.dir.glob(f"{writer}-*{SUFFIX}")), *elsewhere]
        seqs = [int(n[len(writer) + 1 : -len(SUFFIX)]) for n in names
                if n.startswith(writer + "-") and n.endswith(SUFFIX) and n[len(writer) + 1 : -len(SUFFIX)].isdigit()]
        self.seq = max(seqs) + 1 if seqs else 0
        self.in_file = 0
        self.count = 0

    @property
    def path(self) -> Path:
        return self.dir / f"{self.writer}-{self.seq:05d}{SUFFIX}"

    def write_batch(self, records: Iterable[LinkRecord]) -> None:
        self.write_maps([r.to_map() for r in records])

    def write_maps(self, records: Iterable[dict[str, Any]]) -> None:
        """Records in their stored form (:meth:`LinkRecord.to_map`), as given: for records made
        elsewhere, and for tests of what a reader does with damaged ones."""
        records = list(records)
        if not records:
            return
        packer = msgpack.Packer(use_bin_type=True)
        payload = b"".join(packer.pack(r) for r in records)
        durable.append(self.path, gzip.compress(payload, compresslevel=5))  # before the batch's commit
        self.in_file += len(records)
        self.count += len(records)
        if self.in_file >= self.records_per_file:
            self.close()

    def close(self) -> None:
        """Nothing is buffered between batches: the file in progress is complete, and the next
        batch starts a new one."""
        if self.in_file:
            if self.on_closed is not None:
                self.on_closed(self.path)
            self.seq += 1
            self.in_file = 0


def _members(path: Path, block: int = 1 << 18) -> Iterator[bytes]:
    """The decompressed gzip members of a file, read ``block`` bytes at a time: memory is one
    member (a batch), not the file (200,000 records by default)."""
    with open(path, "rb") as f:
        data = f.read(block)
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            parts = []
            while True:
                try:
                    parts.append(d.decompress(data))
                except zlib.error:
                    log.warning("%s: corrupt gzip member, stopping there", path)
                    return
                if d.eof:
                    data = d.unused_data or f.read(block)
                    break
                data = f.read(block)
                if not data:
                    log.warning("%s: truncated final batch ignored (crawl was interrupted)", path)
                    return
            yield b"".join(parts)


def read_frames(path: str | Path) -> Iterator[Any]:
    """Every msgpack object of a file in this framing (gzip members of objects back to back)."""
    for chunk in _members(Path(path)):
        yield from _unpack(chunk)


def read_link_file(path: str | Path) -> Iterator[LinkRecord]:
    """The records of one file; a map that is not a record is skipped with a warning."""
    bad = 0
    for m in read_frames(path):
        rec = LinkRecord.from_map(m)
        if rec is None:
            bad += 1
        else:
            yield rec
    if bad:
        log.warning("%s: %d entries without a URL skipped", path, bad)


def _unpack(chunk: bytes) -> Iterator[dict[str, Any]]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(chunk)
    yield from unpacker


def iter_link_records(crawl_dir: str | Path, part: str = LINKS_SUBDIR) -> Iterator[LinkRecord]:
    """Every record of a crawl, file by file in name order: of its fetches (``links``), or of its
    rendered pages (``rendered``: a page's links and title as its rendered DOM has them, its ``embeds``
    what it asked for, its ``warc`` the DOM's resource record)."""
    for path in sorted((Path(crawl_dir) / part).glob(f"*{SUFFIX}")):
        yield from read_link_file(path)
