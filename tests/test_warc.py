"""WARC store: records read back by BOTH warcio and fastwarc, digests verified, offsets seekable."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from urllib.parse import urlsplit

from aiohttp import web
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from loopback_http import serve
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from raycrawl.actors.fetch.fetcher import Fetcher, FetchResult
from raycrawl.policies.networks import NetworkPolicy
from raycrawl.storage.warc import (
    DUPLICATE_KIND,
    DUPLICATE_OF,
    WarcStore,
    iter_responses,
    read_record_at,
    sha1_b32,
    warc_files,
)

BODY = "<html><title>T</title><body>h\u00e9llo</body></html>".encode()


def _target(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def exchange(url: str, body: bytes = BODY, status: int = 200, **kw) -> FetchResult:
    raw = [(b"Content-Type", b"text/html; charset=utf-8"), (b"Server", b"test")]
    fr = FetchResult(url=url, ip="127.0.0.1", status=status, body=body, ctype="text/html",
                     headers={"content-type": "text/html; charset=utf-8"}, started=1_700_000_000.0,
                     ended=1_700_000_000.25, status_line=f"HTTP/1.1 {status} OK", raw_headers=raw,
                     request_head=f"GET {_target(url)} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n\r\n".encode(), **kw)
    return fr


def warcio_records(path):
    out = []
    with open(path, "rb") as f:
        it = WarcioIterator(f, check_digests=True)
        for rec in it:
            body = rec.content_stream().read()
            out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"), it.get_record_offset(), body,
                        rec.digest_checker.passed, rec.rec_headers, rec.http_headers))
    return out


def test_request_response_readable_by_warcio_and_fastwarc(tmp_path):
    store = WarcStore(tmp_path, "agent0")
    pages = [exchange(f"http://a.test/p{i}", BODY + str(i).encode()) for i in range(5)]
    locs = [store.write(fr) for fr in pages]
    store.close()
    [path] = warc_files(tmp_path)
    assert {name for name, _ in locs} == {path.name}

    recs = warcio_records(path)
    assert [r[0] for r in recs] == ["warcinfo"] + ["request", "response"] * 5
    for rtype, url, offset, body, passed, hdrs, http in recs:
        assert passed is not False, (rtype, url)
        if rtype == "response":
            i = int(url.rsplit("p", 1)[1])
            assert body == pages[i].body
            assert passed is True  # block and payload digests checked by warcio
            assert hdrs.get_header("WARC-IP-Address") == "127.0.0.1"
            assert offset == locs[i][1]
            assert hdrs.get_header("WARC-Warcinfo-ID") == recs[0][5].get_header("WARC-Record-ID")
            assert http.get_header("Content-Type") == "text/html; charset=utf-8"
        if rtype == "request":
            assert body == b""  # GET: no request body, the head is the HTTP headers

    with open(path, "rb") as f:
        fast = [(r.record_type, r.headers.get("WARC-Target-URI"), r.stream_pos, r.verify_block_digest())
                for r in FastIterator(f, parse_http=False)]  # block digests need the unparsed block
    assert [t for t, *_ in fast] == [WarcRecordType.warcinfo] + [WarcRecordType.request, WarcRecordType.response] * 5
    assert all(ok for *_, ok in fast)
    assert [pos for t, _, pos, _ in fast if t == WarcRecordType.response] == [off for _, off in locs]

    # every record is its own gzip member: decompressing from an offset yields exactly one record
    data = path.read_bytes()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    member = d.decompress(data[locs[2][1]:])
    assert member.startswith(b"WARC/1.1\r\nWARC-Type: response") and b"/p2" in member and d.eof

    assert [(u, b) for u, _, b in iter_responses(tmp_path)] == [(fr.url, fr.body) for fr in pages]
    url, headers, body = read_record_at(tmp_path, *locs[3])
    assert (url, body, headers["content-type"]) == (pages[3].url, pages[3].body, "text/html; charset=utf-8")


def test_payload_digest_is_sha1_of_body(tmp_path):
    import base64

    store = WarcStore(tmp_path, "x")
    store.write(exchange("http://a.test/d"))
    store.close()
    with open(warc_files(tmp_path)[0], "rb") as f:
        checked = [(r.headers["WARC-Payload-Digest"], r.verify_payload_digest())
                   for r in FastIterator(f, parse_http=True, record_types=WarcRecordType.response)]
    expected = "sha1:" + base64.b32encode(hashlib.sha1(BODY).digest()).decode()
    assert checked == [(expected, True)]


def test_revisit_record(tmp_path):
    store = WarcStore(tmp_path, "agent0")
    store.write(exchange("http://a.test/orig"))
    name, offset = store.write(exchange("http://a.test/copy"),
                               revisit_of=("http://a.test/orig", "2023-11-14T22:13:20Z", sha1_b32(BODY)))
    store.close()
    recs = warcio_records(tmp_path / name)
    [rev] = [r for r in recs if r[0] == "revisit"]
    assert rev[2] == offset and rev[1] == "http://a.test/copy"
    assert rev[5].get_header("WARC-Refers-To-Target-URI") == "http://a.test/orig"
    assert rev[5].get_header("WARC-Refers-To-Date") == "2023-11-14T22:13:20Z"
    assert rev[5].get_header("WARC-Profile").endswith("identical-payload-digest")
    assert rev[3] == b""  # headers only
    assert [u for u, _, _ in iter_responses(tmp_path)] == ["http://a.test/orig"]
    with open(tmp_path / name, "rb") as f:
        assert [r.record_type for r in FastIterator(f)][-1] == WarcRecordType.revisit
    # the revisit's payload digest is its referent's: the claim "identical payload" is true
    orig = [r for r in recs if r[0] == "response"][0]
    assert rev[5].get_header("WARC-Payload-Digest") == orig[5].get_header("WARC-Payload-Digest")


def test_revisit_refused_unless_payload_byte_identical(tmp_path):
    """The archive never lies: a revisit for other bytes (a text or near duplicate) is refused, and
    such a duplicate is stored whole, marked, and left out of the analytics' reader by default."""
    import pytest

    store = WarcStore(tmp_path, "agent0")
    store.write(exchange("http://a.test/orig"))
    other = exchange("http://a.test/copy", BODY.replace(b"<title>", b"<title> "))  # same text, other bytes
    with pytest.raises(ValueError, match="not byte-identical"):
        store.write(other, revisit_of=("http://a.test/orig", "2023-11-14T22:13:20Z", sha1_b32(BODY)))
    truncated = exchange("http://a.test/cut", truncated="length")
    with pytest.raises(ValueError, match="not byte-identical"):
        store.write(truncated, revisit_of=("http://a.test/orig", "2023-11-14T22:13:20Z", sha1_b32(BODY)))
    name, offset = store.write(other, duplicate_of=("http://a.test/orig", "exact"))
    store.close()
    recs = warcio_records(tmp_path / name)
    assert [r[0] for r in recs].count("revisit") == 0
    [dup] = [r for r in recs if r[1] == "http://a.test/copy" and r[0] == "response"]
    assert dup[2] == offset and dup[3] == other.body and dup[4] is True
    assert dup[5].get_header(DUPLICATE_OF) == "http://a.test/orig" and dup[5].get_header(DUPLICATE_KIND) == "exact"
    assert [u for u, _, _ in iter_responses(tmp_path)] == ["http://a.test/orig"]
    assert [u for u, _, _ in iter_responses(tmp_path, duplicates=True)] == ["http://a.test/orig", "http://a.test/copy"]


def test_rotation_and_resume_new_file(tmp_path):
    store = WarcStore(tmp_path, "agent0", max_file_bytes=2000)
    locs = [store.write(exchange(f"http://a.test/{i}", BODY * 10)) for i in range(10)]
    store.close()
    files = warc_files(tmp_path)
    assert len(files) >= 3 and len({n for n, _ in locs}) == len(files)
    # every file starts with its own warcinfo and is independently readable
    for path in files:
        recs = warcio_records(path)
        assert recs[0][0] == "warcinfo" and all(r[4] is not False for r in recs)
    again = WarcStore(tmp_path, "agent0", max_file_bytes=2000)
    name, _ = again.write(exchange("http://a.test/later"))
    again.close()
    assert name not in {p.name for p in files}
    assert [u for u, _, _ in iter_responses(tmp_path)] == [f"http://a.test/{i}" for i in range(10)] + ["http://a.test/later"]


def test_torn_tail_skipped(tmp_path, caplog):
    store = WarcStore(tmp_path, "agent0")
    for i in range(3):
        store.write(exchange(f"http://a.test/{i}"))
    store.close()
    path = warc_files(tmp_path)[0]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # a kill -9 in the middle of the last member
    assert [u for u, _, _ in iter_responses(tmp_path)] == ["http://a.test/0", "http://a.test/1"]


def test_damage_in_the_middle_loses_only_that_record(tmp_path, caplog):
    store = WarcStore(tmp_path, "agent0")
    locs = [store.write(exchange(f"http://a.test/{i}", BODY * 20 + bytes([i]))) for i in range(6)]
    store.close()
    path = warc_files(tmp_path)[0]
    data = bytearray(path.read_bytes())
    hit = locs[2][1] + 60  # inside the compressed data of record 2's response
    data[hit : hit + 30] = b"\x00" * 30
    path.write_bytes(bytes(data))
    got = [u for u, _, _ in iter_responses(tmp_path)]
    assert got == [f"http://a.test/{i}" for i in (0, 1, 3, 4, 5)]
    assert "damaged record" in caplog.text


def test_truncated_flag_and_refusal_without_response(tmp_path):
    store = WarcStore(tmp_path, "t")
    store.write(exchange("http://a.test/big", truncated="length", error="too-large"))
    store.write(exchange("http://a.test/cut", truncated="disconnect", error="reset"))
    try:
        store.write(FetchResult(url="http://a.test/x", ip="127.0.0.1", error="connect"))
        raise AssertionError("a fetch without a response must be refused")
    except ValueError:
        pass
    store.close()
    big, cut = [r for r in warcio_records(warc_files(tmp_path)[0]) if r[0] == "response"]
    assert big[5].get_header("WARC-Truncated") == "length"
    assert cut[5].get_header("WARC-Truncated") == "disconnect"


async def test_real_gzip_fetch_stored_decoded(tmp_path):
    async def handle(request):
        return web.Response(body=gzip.compress(BODY), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_get("/", handle)
    runner, port = await serve(app, access_log=None, shutdown_timeout=0.2)
    fetcher = Fetcher("raycrawl-test", 2, 2, 100_000, 1_000_000, NetworkPolicy("127.0.0.1/32"))
    try:
        fr = await fetcher.fetch(f"http://gz.test:{port}/", "127.0.0.1")
    finally:
        await fetcher.close()
        await runner.cleanup()
    store = WarcStore(tmp_path, "g")
    name, offset = store.write(fr)
    store.close()
    recs = warcio_records(tmp_path / name)
    [req] = [r for r in recs if r[0] == "request"]
    [resp] = [r for r in recs if r[0] == "response"]
    assert resp[3] == BODY and resp[4] is True
    assert resp[6].get_header("Content-Encoding") is None
    assert resp[6].get_header("X-Crawler-Content-Encoding") == "gzip"
    assert resp[6].get_header("Content-Length") == str(len(BODY))
    assert req[6].get_header("Host") == f"gz.test:{port}"
    assert req[6].get_header("User-Agent") == "raycrawl-test"


def test_demo_stage_counts(tmp_path):
    from raycrawl.storage.warc import demo_stage

    store = WarcStore(tmp_path / "warc", "agent0")
    for i in range(4):
        store.write(exchange(f"http://h{i % 2}.test/{i}"))
    store.write(exchange("http://h0.test/dup"), revisit_of=("http://h0.test/0", "2023-11-14T22:13:20Z", sha1_b32(BODY)))
    store.close()
    text = demo_stage(tmp_path)
    assert "request 5, response 4, revisit 1, warcinfo 1" in text
    assert "responses from 2 hosts" in text and "11/11 ok" in text
    assert "no WARC files" in demo_stage(tmp_path / "empty")


async def test_resolve_fetch_parse_store_pipeline(tmp_path):
    """The parts composed as the agent composes them (no Ray): hosts file → Fetcher → Parser → WarcStore,
    breadth-first over a small site graph; the WARC must hold every page and the parsed links must be
    the graph's arcs."""
    from raycrawl.actors.fetch.dns import Resolver
    from raycrawl.actors.visit.parser import Parser

    graph = {  # host/path → out-links (relative and absolute forms on purpose)
        "a.test/": ["/one", "http://B.TEST:{port}/"],
        "a.test/one": ["./", "../two?x=1#frag"],
        "a.test/two?x=1": [],
        "b.test/": ["http://a.test:{port}/one", "/self"],
        "b.test/self": [],
    }

    async def handle(request):
        key = request.headers["Host"].split(":")[0] + request.path_qs
        if request.path == "/robots.txt":
            return web.Response(status=404)
        links = "".join(f'<a href="{h.format(port=port)}">x</a>' for h in graph[key])
        return web.Response(text=f"<html><title>{key}</title><body>{links}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner, port = await serve(app, access_log=None, shutdown_timeout=0.2)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 a.test b.test\n")
    resolver = Resolver(hosts_file=str(hosts))
    fetcher = Fetcher("raycrawl-test", 2, 2, 100_000, 1_000_000, NetworkPolicy("127.0.0.0/8"))
    parser, store = Parser(), WarcStore(tmp_path / "warc", "agent0")
    queue, seen, arcs = [f"http://a.test:{port}/"], {f"http://a.test:{port}/"}, {}
    try:
        while queue:
            url = queue.pop(0)
            ip = await resolver.resolve(url.split("/")[2])
            fr = await fetcher.fetch(url, ip)
            assert fr.error is None and fr.status == 200, (url, fr.error)
            store.write(fr)
            arcs[url] = parser.parse(fr).links
            for link in arcs[url]:
                if link not in seen:
                    seen.add(link)
                    queue.append(link)
    finally:
        await fetcher.close()
        await runner.cleanup()
        store.close()
    host_port = {"a.test": f"a.test:{port}", "b.test": f"b.test:{port}"}
    assert set(arcs) == {"http://" + host_port[k.split("/")[0]] + k[len(k.split("/")[0]):] for k in graph}
    stored = {url: Parser().parse(FetchResult(url=url, ip="", status=200, body=body, ctype="text/html",
                                              headers=headers)).links for url, headers, body in iter_responses(tmp_path / "warc")}
    assert stored == arcs  # what is archived parses to what was crawled
    assert arcs[f"http://a.test:{port}/one"] == [f"http://a.test:{port}/", f"http://a.test:{port}/two?x=1"]
    assert arcs[f"http://b.test:{port}/"] == [f"http://a.test:{port}/one", f"http://b.test:{port}/self"]


def test_heritrix_names_and_warcinfo_of_an_archivist(tmp_path):
    """Files are named PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz (two crawls' files never clash in one
    collection; a resumed writer continues the serials, old-style names included); the warcinfo
    record says who crawled, as whom, under which robots policy and settings, with which software."""
    import json
    import os
    import re

    from raycrawl import __version__
    from raycrawl.settings import Settings
    from raycrawl.storage.warc import warc_info

    s = Settings(operator="Jo Archivist <jo@archive.test>", user_agent="testbot/2 (+http://bot.test/)",
                 host_delay=1.5)
    (tmp_path / "agent0-00004.warc.gz").write_bytes(b"")  # a file of a crawl from before Heritrix names
    names = set()
    for crawl in ("one", "two"):
        store = WarcStore(tmp_path, "agent0", info=warc_info(s, crawl))
        name, _ = store.write(exchange("http://a.test/x"))
        store.close()
        names.add(name)
        m = re.fullmatch(r"agent0-(\d{17})-(\d{5})-(\d+)~([A-Za-z0-9._]+)\.warc\.gz", name)
        assert m and int(m[3]) == os.getpid(), name
    assert sorted(int(re.split("-", n)[2]) for n in names) == [5, 6]
    info = {}
    with open(tmp_path / sorted(names)[1], "rb") as f:
        rec = next(iter(WarcioIterator(f)))
        assert rec.rec_type == "warcinfo" and rec.rec_headers.get_header("WARC-Filename") == sorted(names)[1]
        for line in rec.content_stream().read().decode().splitlines():
            key, _, value = line.partition(": ")
            info[key] = value
    assert info["operator"] == "Jo Archivist <jo@archive.test>"
    assert info["http-header-user-agent"] == "testbot/2 (+http://bot.test/)"
    assert info["robots"].startswith("obey") and info["isPartOf"] == "two"
    assert info["software"].startswith(f"raycrawl/{__version__} ")
    assert json.loads(info["raycrawl-settings"])["host_delay"] == 1.5
