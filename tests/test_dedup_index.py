"""Deduplication against an earlier collection (``--dedup-index``, storage/dedup_index.py): a second
crawl of the same web stores the payloads the first archived as revisits of the first crawl's
captures — only byte-identical ones (warcio and a fresh fetch from websim are the judges) — its
WARC no longer holds those bytes, and pywb replays the revisits from the first crawl's WARC."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from raycrawl.errors import UserError
from raycrawl.storage.dedup_index import DedupIndex, build

ROOT = Path(__file__).resolve().parents[1]


def test_index_table_keeps_earliest_capture_and_skips_non_captures(tmp_path) -> None:
    cdxj = tmp_path / "a.cdxj"
    cdxj.write_text(
        'test,a)/ 20200101000000 {"url": "http://a.test/", "digest": "sha1:AAAA", "status": "200", "mime": "text/html"}\n'
        'test,a)/ 20190101000000 {"url": "http://a.test/old", "digest": "AAAA", "status": "200", "mime": "text/html"}\n'
        'test,b)/ 20210101000000 {"url": "http://b.test/", "digest": "sha1:BBBB", "mime": "warc/revisit"}\n'
        'test,c)/ 20210101000000 {"url": "http://c.test/", "digest": "sha1:CCCC", "status": "304"}\n'
        'test,d)/ 20210101000000 {"url": "http://d.test/", "status": "200"}\n')
    index = DedupIndex(build([str(cdxj)], tmp_path))
    assert index.earliest(["sha1:AAAA", "sha1:BBBB", "sha1:CCCC", "sha1:ZZZZ"]) == {
        "sha1:AAAA": ("http://a.test/old", "2019-01-01T00:00:00Z")}
    index.close()
    (tmp_path / "bad.cdxj").write_text("x 1 {not json\n")
    with pytest.raises(UserError, match="not a CDXJ line"):
        build([str(tmp_path / "bad.cdxj")], tmp_path / "o")


def _records(warc_dir: Path) -> list[dict]:
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    h = rec.rec_headers
                    out.append({"type": rec.rec_type, "url": h.get_header("WARC-Target-URI"),
                                "date": h.get_header("WARC-Date"), "digest": h.get_header("WARC-Payload-Digest"),
                                "profile": h.get_header("WARC-Profile"),
                                "refers": (h.get_header("WARC-Refers-To-Target-URI"), h.get_header("WARC-Refers-To-Date")),
                                "status": rec.http_headers.get_statuscode() if rec.http_headers else None,
                                "payload": rec.content_stream().read()})
    return out


def _uncompressed(warc_dir: Path) -> int:
    total = 0
    for path in warc_dir.glob("*.warc.gz"):
        data = path.read_bytes()
        while data:
            d = zlib.decompressobj(wbits=31)
            total += len(d.decompress(data))
            data = d.unused_data
    return total


def _crawl(web, out: Path, *extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                        "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                        "--host-delay", "0.05", "--ip-delay", "0.0", *extra],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert r.returncode == 0, r.stderr[-3000:]


async def _fetch_again(web, urls: list[str]) -> dict[str, bytes]:
    import aiohttp

    from raycrawl.websim.client import HostsResolver

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=HostsResolver(web.hosts_file)),
                                     auto_decompress=True) as session:
        out = {}
        for url in urls:
            async with session.get(url, allow_redirects=False) as resp:
                out[url] = await resp.read()
        return out


def test_second_crawl_revisits_what_the_first_archived(tmp_path) -> None:
    from pywb_replay import check_replay, pywb

    from raycrawl.websim import Websim

    with Websim(hosts=6, ips=2, seed=11, clean=True, pages_per_host_mean=8, out_dir=tmp_path / "web") as web:
        first, second = tmp_path / "first", tmp_path / "second"
        _crawl(web, first)
        r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(first)], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr
        _crawl(web, second, "--dedup-index", str(first / "indexes" / "index.cdxj"))
        one, two = _records(first / "warc"), _records(second / "warc")
        by_second = {}  # (URL, WARC-Date to the second) → payload, of the first crawl's responses
        for rec in one:
            if rec["type"] == "response":
                by_second[rec["url"], rec["date"][:19]] = rec
        # (a second crawl's revisits of its own captures, its exact duplicates, are not these)
        revisits = [r for r in two if r["type"] == "revisit" and (r["refers"][0], (r["refers"][1] or "")[:19]) in by_second]
        again = asyncio.run(_fetch_again(web, [r["url"] for r in revisits]))
    assert len(revisits) > 20, len(revisits)
    unchanged = 0
    for rev in revisits:
        original = by_second[rev["refers"][0], rev["refers"][1][:19]]
        assert rev["profile"].endswith("/identical-payload-digest") and rev["digest"] == original["digest"], rev
        assert again[rev["url"]] == original["payload"], rev["url"]  # the bytes really were the same
        unchanged += len(original["payload"])
    # every 200 response of the second crawl whose payload the first archived became a revisit
    # (robots.txt excepted: stored whole every time, the evidence of the policy obeyed)
    archived = {r["digest"] for r in one if r["type"] == "response"}
    stored_again = [r["url"] for r in two if r["type"] == "response" and r["status"] == "200" and r["digest"] in archived
                    and not r["url"].endswith("/robots.txt")]
    assert not stored_again, stored_again[:5]
    # its WARC no longer holds those bytes (a revisit's head is a few hundred bytes longer than a response's)
    size1, size2 = _uncompressed(first / "warc"), _uncompressed(second / "warc")
    assert size1 - size2 >= unchanged - 400 * len(revisits), (size1, size2, unchanged, len(revisits))
    # pywb replays the second crawl's revisits from the first crawl's WARC (one collection holds both)
    coll = tmp_path / "pywb" / "collections" / "both"
    for crawl in (first, second):
        r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(crawl), "--pywb", str(coll)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr
    expected = {(rev["url"], "".join(c for c in rev["date"] if c.isdigit())[:14]):
                (int(rev["status"]), by_second[rev["refers"][0], rev["refers"][1][:19]]["payload"]) for rev in revisits}
    with pywb(tmp_path / "pywb") as port:
        check_replay(port, "both", expected)
