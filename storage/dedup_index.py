"""Payloads archived in earlier collections (Heritrix's and Browsertrix's dedup index): the crawl's
``--dedup-index CDXJ…`` read into one sqlite table, payload digest → the earliest capture with it,
so that a fetched payload already archived there is written as a WARC ``revisit`` of that capture
(identical-payload-digest, ``WARC-Refers-To-Target-URI``/``-Date``) instead of again in full.

Any CDXJ with digests serves: raycrawl's own ``warc index`` output, pywb's or cdxj-indexer's.
Captures only: lines of revisit records (``mime: warc/revisit``) and 304s name no payload of their
own, and lines without a digest are skipped. Digests are compared as ``sha1:BASE32`` (a bare
base32 digest, as some indexers write it, gets the prefix). The WARC writer still refuses a revisit
whose payload digest differs from the one named (storage/warc.py): a revisit only ever claims what
is true of its bytes.

robots.txt responses are stored whole every time (the decide step hands them to no stage): they
are small, and each is the evidence of the policy the crawl obeyed when it ran.

The table is built once per crawl in ``OUT/dedup-index.sqlite`` (rebuilt when the CDXJ files
change) and read by every agent with a bounded page cache, however large the earlier collections.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from raycrawl.errors import UserError

FILE = "dedup-index.sqlite"
BATCH = 20_000


def _digest(value: str) -> str:
    value = value.strip()
    return value if value.startswith("sha1:") else "sha1:" + value.upper()


def _signature(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _captures(path: Path) -> Iterable[tuple[str, str, str]]:
    """(digest, 14-digit timestamp, URL) of every capture line of a CDXJ file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) < 3 or not line.strip():
                continue
            try:
                fields = json.loads(parts[2])
            except json.JSONDecodeError:
                raise UserError(f"--dedup-index {path}:{lineno}: not a CDXJ line (SURT TIMESTAMP {{json}})") from None
            digest, url = fields.get("digest"), fields.get("url")
            if not digest or not url or fields.get("mime") == "warc/revisit" or str(fields.get("status")) == "304":
                continue
            yield _digest(str(digest)), parts[1][:14], url


def build(cdxj: list[str], out: Path) -> Path:
    """``OUT/dedup-index.sqlite`` from the CDXJ files ``cdxj`` (reused when they have not changed)."""
    paths = [Path(p) for p in cdxj]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise UserError(f"--dedup-index: no such file: {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / FILE
    signature = _signature(paths)
    if target.exists():
        with sqlite3.connect(target) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'sources'").fetchone()
        if row and row[0] == signature:
            return target
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                         "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                         "CREATE TABLE capture(digest TEXT PRIMARY KEY, ts TEXT, url TEXT) WITHOUT ROWID;")
        upsert = ("INSERT INTO capture VALUES (?, ?, ?) ON CONFLICT(digest) DO UPDATE SET ts = excluded.ts, "
                  "url = excluded.url WHERE excluded.ts < capture.ts")
        db.execute("BEGIN")
        for path in paths:
            batch: list[tuple[str, str, str]] = []
            for row in _captures(path):
                batch.append(row)
                if len(batch) >= BATCH:
                    db.executemany(upsert, batch)
                    batch.clear()
            db.executemany(upsert, batch)
        db.execute("INSERT INTO meta VALUES ('sources', ?)", (signature,))
        db.execute("COMMIT")
    finally:
        db.close()
    tmp.replace(target)
    return target


class DedupIndex:
    """Read access to a built table (one connection per process)."""

    def __init__(self, path: str | Path) -> None:
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self.db.execute("PRAGMA cache_size=-16384")

    def earliest(self, digests: Iterable[str]) -> dict[str, tuple[str, str]]:
        """digest → (URL, WARC-Date) of the earliest capture with that payload, for those archived."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, tuple[str, str]] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            rows = self.db.execute(f"SELECT digest, ts, url FROM capture WHERE digest IN ({','.join('?' * len(chunk))})",
                                   chunk)
            for digest, ts, url in rows:
                ts = ts.ljust(14, "0")
                found[digest] = (url, f"{ts[:4]}-{ts[4:6]}-{ts[6:8]}T{ts[8:10]}:{ts[10:12]}:{ts[12:14]}Z")
        return found

    def close(self) -> None:
        self.db.close()
