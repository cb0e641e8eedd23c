"""Replay through pywb, the web archive replay tool archivists run, on loopback: a crawl's WARC
files and CDXJ index (``raycrawl warc index --pywb``) must replay every capture as it was fetched.

pywb lives in its own venv (``make pywb``; it pins a redis-py the crawler cannot share). The
expected bytes come from warcio, an independent WARC reader: a response's own payload, and for an
identical-payload revisit the payload of the capture it refers to."""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

REPO = Path(__file__).resolve().parents[1]
WAYBACK = REPO / ".venv-pywb" / "bin" / "wayback"


def index_collection(crawl_dir: Path, root: Path, name: str = "crawl") -> dict[str, str]:
    """A pywb collection ``root/collections/NAME`` of the crawl's WARC files (``raycrawl warc index
    --pywb``); each URL's capture timestamp, for replay URLs ``NAME/STAMPmp_/URL``."""
    coll = root / "collections" / name
    r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(crawl_dir), "--pywb", str(coll)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    return {json.loads(line.split(" ", 2)[2])["url"]: line.split(" ", 2)[1]
            for line in (coll / "indexes" / f"{name}.cdxj").read_text().splitlines()}


@contextlib.contextmanager
def pywb(root: Path) -> Iterator[int]:
    """``wayback`` serving ``root/collections/*`` on a loopback port; yields the port."""
    from raycrawl.redis_server import free_port

    assert WAYBACK.exists(), f"{WAYBACK} is missing: run `make pywb` (make test does)"
    port = free_port()
    with open(root / "wayback.log", "wb") as log:
        proc = subprocess.Popen([str(WAYBACK), "-b", "127.0.0.1", "-p", str(port)], cwd=root, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (root / "wayback.log").read_text()[-3000:]
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def captures(warc_dir: Path) -> tuple[dict[tuple[str, str], tuple[int, bytes]], int]:
    """(URL, 14-digit timestamp) → (HTTP status, payload) of every capture pywb should replay:
    responses and identical-payload revisits (resolved to the payload they refer to), read by
    warcio; and how many of them are revisits. Keys with two captures in one second are left out (a
    replay cannot tell them apart)."""
    payloads: dict[tuple[str, str], bytes] = {}
    found: list[tuple[str, str, int, bytes | tuple[str, str]]] = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.rec_headers
                if h.get_header("WARC-Truncated") in ("disconnect", "time"):
                    continue  # a body the server cut short is no capture of the page (storage/cdxj.py)
                url, date = h.get_header("WARC-Target-URI"), h.get_header("WARC-Date")
                status = int(rec.http_headers.get_statuscode())
                body = rec.content_stream().read()
                if rec.rec_type == "response":
                    payloads[url, date] = body
                    found.append((url, date, status, body))
                elif status != 304:  # not-modified revisits are not indexed (storage/cdxj.py)
                    found.append((url, date, status, (h.get_header("WARC-Refers-To-Target-URI"),
                                                      h.get_header("WARC-Refers-To-Date"))))
    ts = lambda date: "".join(ch for ch in date if ch.isdigit())[:14]  # noqa: E731
    seen = Counter((url, ts(date)) for url, date, _, _ in found)
    unique = [(url, ts(date), status, body) for url, date, status, body in found if seen[url, ts(date)] == 1]
    return ({(url, stamp): (status, payloads[body] if isinstance(body, tuple) else body)
             for url, stamp, status, body in unique}, sum(isinstance(body, tuple) for *_, body in unique))


def cut_short(warc_dir: Path) -> list[tuple[str, str]]:
    """(URL, 14-digit timestamp) of every response whose body the server cut short (warcio)."""
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                h = rec.rec_headers
                if rec.rec_type == "response" and h.get_header("WARC-Truncated") in ("disconnect", "time"):
                    out.append((h.get_header("WARC-Target-URI"),
                                "".join(ch for ch in h.get_header("WARC-Date") if ch.isdigit())[:14]))
    return out


def check_replay(port: int, collection: str, expected: dict[tuple[str, str], tuple[int, bytes]]) -> None:
    """Every capture replays (``id_``: the original bytes, no rewriting) with its status and payload."""
    wrong = []
    for (url, stamp), (status, payload) in expected.items():
        got_status, body = get(port, f"/{collection}/{stamp}id_/{url}")
        if (got_status, body) != (status, payload):
            wrong.append((url, stamp, status, got_status, len(payload), len(body)))
    assert not wrong, f"{len(wrong)} of {len(expected)} captures replay wrongly: {wrong[:5]}"
