"""Fetcher over real HTTP on loopback: an aiohttp server of our own with every misbehaviour."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import ipaddress
import os
import socket
import time
import zlib

import brotli
import pytest
from aiohttp import web

from raycrawl.actors.fetch.fetcher import Fetcher, FetchResult
from raycrawl.policies.networks import NetworkPolicy
from raycrawl.urls import is_ip_literal

PAGE = b"<html><head><title>Hello</title></head><body><a href='/b'>b</a></body></html>"
LATIN1 = "<html><body>caf\u00e9 cr\u00e8me br\u00fbl\u00e9e</body></html>".encode("latin-1")
BINARY = os.urandom(4096)
BIG = b"x" * 300_000


class Site:
    """Server state visible to the tests (what it received, on which connections)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, tuple]] = []  # (path, Host header, client peer)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path_qs, request.headers.get("Host", ""), request.transport.get_extra_info("peername")))
        path = request.path
        if path == "/page":
            return web.Response(body=PAGE, content_type="text/html")
        if path == "/echo":
            return web.Response(text=f"{request.headers.get('User-Agent')}|{request.path_qs}", content_type="text/plain")
        if path == "/slow":
            await asyncio.sleep(3)
            return web.Response(text="late")
        if path == "/drip":  # headers at once, then one byte every 0.3 s: only a total timeout ends it
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            await resp.prepare(request)
            for _ in range(30):
                await resp.write(b"x")
                await asyncio.sleep(0.3)
            return resp
        if path == "/reset":
            resp = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Length": "10000"})
            await resp.prepare(request)
            await resp.write(b"<html>partial")
            await asyncio.sleep(0.05)
            request.transport.abort()
            return resp
        if path == "/big":
            return web.Response(body=BIG, content_type="text/html")
        if path == "/big-stream":  # no Content-Length: the cap must hit while streaming
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for _ in range(30):
                await resp.write(b"y" * 10_000)
            return resp
        if path == "/gzip":
            return web.Response(body=gzip.compress(PAGE), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})
        if path == "/deflate-raw":
            c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            body = c.compress(PAGE) + c.flush()
            return web.Response(body=body, headers={"Content-Type": "text/html", "Content-Encoding": "deflate"})
        if path == "/br":
            return web.Response(body=brotli.compress(PAGE), headers={"Content-Type": "text/html", "Content-Encoding": "br"})
        if path == "/bomb":
            return web.Response(body=bomb("gzip"), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})
        if path == "/br-bomb":
            return web.Response(body=bomb("br"), headers={"Content-Type": "text/html", "Content-Encoding": "br"})
        if path == "/corrupt-gzip":
            return web.Response(body=b"\x1f\x8b\x08\x00garbage" * 10, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})
        if path == "/corrupt-br":
            return web.Response(body=brotli.compress(PAGE)[:-3] + b"\xff\xff\xff" * 50,
                                headers={"Content-Type": "text/html", "Content-Encoding": "br"})
        if path == "/unknown-encoding":
            return web.Response(body=PAGE, headers={"Content-Type": "text/html", "Content-Encoding": "x-rot13"})
        if path == "/redirect":
            raise web.HTTPMovedPermanently(location="../Dir/./Page?q=1#frag")
        if path == "/redirect-abs":
            raise web.HTTPFound(location="HTTP://Other.TEST:80/x")
        if path == "/binary":
            return web.Response(body=BINARY, content_type="text/html")
        if path == "/latin1":
            return web.Response(body=LATIN1, headers={"Content-Type": "text/html; charset=ISO-8859-1"})
        if path == "/error":
            return web.Response(status=503, text="down")
        return web.Response(status=404, text="nope")


@functools.cache
def bomb(encoding: str) -> bytes:
    """20 MB of zeros compressed (made on first use: ~1 s of every worker's collection otherwise)."""
    zeros = b"\0" * 20_000_000
    return gzip.compress(zeros, compresslevel=9) if encoding == "gzip" else brotli.compress(zeros)


@pytest.fixture
async def site():
    state = Site()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    state.port = tcp._server.sockets[0].getsockname()[1]
    state.base = f"http://site.test:{state.port}"
    yield state
    await runner.cleanup()


def make_fetcher(**kw) -> Fetcher:
    args = dict(user_agent="raycrawl-test/1.0", connect_timeout=1.0, read_timeout=0.5, max_body=100_000,
                max_decompressed=1_000_000, network_policy=NetworkPolicy("127.0.0.0/8"))
    args.update(kw)
    return Fetcher(**args)


@pytest.fixture
async def fetcher():
    f = make_fetcher()
    yield f
    await f.close()


async def test_page_host_header_and_times(site, fetcher):
    before = time.time()
    fr = await fetcher.fetch(f"{site.base}/page", "127.0.0.1")
    assert fr.error is None and fr.status == 200
    assert fr.body == PAGE and fr.ctype == "text/html"
    assert before <= fr.started <= fr.ended <= time.time()
    assert site.requests[0][1] == f"site.test:{site.port}"  # Host from the URL, not the IP dialed
    assert fr.status_line.startswith("HTTP/1.1 200")
    assert fr.request_head.startswith(b"GET /page HTTP/1.1\r\n") and b"raycrawl-test/1.0" in fr.request_head
    assert fr.request_head.endswith(b"\r\n\r\n")


async def test_user_agent_and_query_sent_verbatim(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/echo?b=2&a=%2F", "127.0.0.1")
    assert fr.body.decode() == "raycrawl-test/1.0|/echo?b=2&a=%2F"


async def test_keep_alive_reuses_one_connection(site, fetcher):
    for _ in range(10):
        fr = await fetcher.fetch(f"{site.base}/page", "127.0.0.1")
        assert fr.status == 200
    peers = {peer for _, _, peer in site.requests}
    assert len(site.requests) == 10 and len(peers) == 1


async def test_many_concurrent(site):
    f = make_fetcher(connect_timeout=5, read_timeout=5, max_connections=50)
    try:
        results = await asyncio.gather(*(f.fetch(f"{site.base}/echo?i={i}", "127.0.0.1") for i in range(200)))
    finally:
        await f.close()
    assert [r.error for r in results] == [None] * 200
    assert [r.body.decode().split("|")[1] for r in results] == [f"/echo?i={i}" for i in range(200)]
    assert len({peer for _, _, peer in site.requests}) <= 50


async def test_forbidden_network_sends_nothing(site):
    f = make_fetcher(network_policy=NetworkPolicy())  # default: public unicast only
    try:
        fr = await f.fetch(f"{site.base}/page", "127.0.0.1")
        literal = await f.fetch(f"http://127.0.0.1:{site.port}/page", "8.8.8.8")  # literal host: the literal is dialed
    finally:
        await f.close()
    assert fr.error == "forbidden-network" and fr.status == 0
    assert literal.error == "forbidden-network" and literal.ip == "127.0.0.1"
    assert site.requests == []


async def test_timeout(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/slow", "127.0.0.1")
    assert fr.error == "timeout" and fr.status == 0 and fr.transient
    assert fr.ended - fr.started < 2.5


async def test_slow_drip_bounded_by_total_timeout(site):
    f = make_fetcher(total_timeout=1.5)
    try:
        fr = await f.fetch(f"{site.base}/drip", "127.0.0.1")
    finally:
        await f.close()
    assert fr.error == "timeout" and fr.ended - fr.started < 3
    # a timeout mid-body keeps what arrived, and says the body is cut by time
    assert fr.status == 200 and fr.body and set(fr.body) == {ord("x")} and fr.truncated == "time"


async def test_reset(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/reset", "127.0.0.1")
    assert fr.error == "reset" and fr.transient
    assert fr.body == b"<html>partial" and fr.truncated == "disconnect"


async def test_connection_close_when_the_host_is_not_visited_again_soon(site, fetcher):
    """keep_alive=False: the request says Connection: close, and the next request to the host dials
    a new connection; keep_alive=True (the default) reuses it."""
    for keep in (True, True, False, True, True):
        fr = await fetcher.fetch(f"{site.base}/page", "127.0.0.1", keep_alive=keep)
        assert fr.status == 200 and (b"Connection: close" in fr.request_head) == (not keep)
    peers = [peer for _, _, peer in site.requests]
    assert peers[0] == peers[1] == peers[2] != peers[3] == peers[4]
    assert fetcher.idle_connections() == 1


async def test_idle_connections_are_capped(site):
    """Past max_idle, the connection idle longest is closed: 12 hosts visited, 4 kept."""
    f = make_fetcher(max_idle=4)
    try:
        for i in range(12):
            await f.fetch(f"http://h{i}.test:{site.port}/page", "127.0.0.1")
            assert f.idle_connections() == min(i + 1, 4)
        await f.fetch(f"http://h11.test:{site.port}/page", "127.0.0.1")  # the newest is still open
        await f.fetch(f"http://h0.test:{site.port}/page", "127.0.0.1")  # the oldest was closed
    finally:
        await f.close()
    peers = [peer for _, _, peer in site.requests]
    assert peers[12] == peers[11] and peers[13] not in peers[:12]


async def test_out_of_descriptors_is_our_error_not_the_hosts(site):
    """With no file descriptor left, a fetch fails as ``local``, not as the host's ``connect``."""
    import resource

    f = make_fetcher()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hog = []
    try:
        await f.fetch(f"{site.base}/page", "127.0.0.1", keep_alive=False)  # the session exists
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        with contextlib.suppress(OSError):
            while True:
                hog.append(socket.socket())
        fr = await f.fetch(f"http://other.test:{site.port}/page", "127.0.0.1")
    finally:
        for sock in hog:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        await f.close()
    assert fr.error == "local" and not fr.transient and fr.status == 0


async def test_connection_refused(fetcher):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fr = await fetcher.fetch(f"http://down.test:{port}/", "127.0.0.1")
    assert fr.error == "connect" and fr.status == 0 and fr.ended >= fr.started


@pytest.mark.parametrize("path", ["/big", "/big-stream"])
async def test_too_large(site, fetcher, path):
    fr = await fetcher.fetch(f"{site.base}{path}", "127.0.0.1")
    assert fr.error == "too-large" and fr.truncated and fr.status == 200
    assert len(fr.body) <= 100_000


@pytest.mark.parametrize("path", ["/gzip", "/deflate-raw", "/br"])
async def test_content_encodings_decoded(site, fetcher, path):
    fr = await fetcher.fetch(f"{site.base}{path}", "127.0.0.1")
    assert fr.error is None and fr.body == PAGE
    assert fr.wire_bytes < len(PAGE) + 64


@pytest.mark.parametrize("path", ["/bomb", "/br-bomb"])
async def test_compression_bomb(site, fetcher, path):
    # (made here, not in the server's handler, where it held the loop a second)
    assert len(bomb("br" if path == "/br-bomb" else "gzip")) < 100_000  # passes the wire cap: only the decompressed cap can catch it
    fr = await fetcher.fetch(f"{site.base}{path}", "127.0.0.1")
    assert fr.error == "bomb" and fr.truncated
    assert len(fr.body) <= 1_000_000


@pytest.mark.parametrize("path", ["/corrupt-gzip", "/corrupt-br", "/unknown-encoding"])
async def test_bad_content_encoding(site, fetcher, path):
    fr = await fetcher.fetch(f"{site.base}{path}", "127.0.0.1")
    assert fr.error == "bad-encoding" and fr.status == 200 and not fr.transient


async def test_redirect_not_followed_canonical_target(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/redirect", "127.0.0.1")
    assert fr.status == 301 and fr.error is None
    assert fr.redirect == f"{site.base}/Dir/Page?q=1"
    assert [p for p, _, _ in site.requests] == ["/redirect"]
    fr = await fetcher.fetch(f"{site.base}/redirect-abs", "127.0.0.1")
    assert fr.status == 302 and fr.redirect == "http://other.test/x"


async def test_binary_and_charset_kept_raw(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/binary", "127.0.0.1")
    assert fr.body == BINARY and fr.ctype == "text/html" and fr.error is None
    fr = await fetcher.fetch(f"{site.base}/latin1", "127.0.0.1")
    assert fr.body == LATIN1 and fr.charset == "iso-8859-1"


async def test_http_errors_are_responses(site, fetcher):
    fr = await fetcher.fetch(f"{site.base}/error", "127.0.0.1")
    assert fr.status == 503 and fr.error is None and fr.transient
    fr = await fetcher.fetch(f"{site.base}/missing", "127.0.0.1")
    assert fr.status == 404 and not fr.transient


async def test_bad_url(fetcher):
    fr = await fetcher.fetch("ftp://x.test/", "127.0.0.1")
    assert fr.error == "bad-url"


def test_fetch_result_pickles():
    import pickle

    fr = FetchResult(url="http://a.test/", ip="127.0.0.1", status=200, body=b"x", raw_headers=[(b"A", b"b")])
    assert pickle.loads(pickle.dumps(fr)) == fr


RAW_REPLIES = {
    "garbage": b"SSH-2.0-OpenSSH_9.0\r\n\r\n",
    "empty": b"",
    "http10-eof": b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>until eof</html>",
    "huge-header": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\nContent-Length: 2\r\n\r\nok",
    "ftp-location": b"HTTP/1.1 302 Found\r\nLocation: ftp://files.test/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "short-body": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/html\r\n\r\nonly this",
    "broken-chunks": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\n"
                     b"9\r\nfirst bit\r\n",
    # a Location in Latin-1 bytes (browsers percent-encode the byte), and one in UTF-8
    "latin1-location": b"HTTP/1.1 301 Moved\r\nLocation: /caf\xe9 x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "utf8-location": b"HTTP/1.1 301 Moved\r\nLocation: /caf\xc3\xa9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
}


@pytest.fixture
async def raw_server():
    """A bare TCP server answering each connection with RAW_REPLIES[first path segment], then closing."""

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        key = head.split(b" ", 2)[1].decode().strip("/")
        writer.write(RAW_REPLIES[key])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield f"http://raw.test:{server.sockets[0].getsockname()[1]}"
    server.close()
    await server.wait_closed()


async def test_misbehaving_servers_are_classified(raw_server, fetcher):
    got = {key: await fetcher.fetch(f"{raw_server}/{key}", "127.0.0.1") for key in RAW_REPLIES}
    assert got["garbage"].error == "bad-response" and got["garbage"].status == 0
    assert got["empty"].error == "reset"
    assert got["http10-eof"].error is None and got["http10-eof"].body == b"<html>until eof</html>"
    assert got["http10-eof"].status_line == "HTTP/1.0 200 OK"
    assert got["huge-header"].error == "bad-response"
    assert got["ftp-location"].status == 302 and got["ftp-location"].redirect is None
    # a body cut short keeps the bytes that arrived, and says it is cut
    assert got["short-body"].error == "reset" and got["short-body"].status == 200
    assert got["short-body"].body == b"only this" and got["short-body"].truncated == "disconnect"
    assert got["broken-chunks"].error == "reset" and got["broken-chunks"].body == b"first bit"
    assert got["broken-chunks"].truncated == "disconnect"
    assert got["http10-eof"].truncated is None
    assert got["latin1-location"].error is None and got["latin1-location"].redirect == f"{raw_server}/caf%E9%20x"
    assert got["utf8-location"].redirect == f"{raw_server}/caf%C3%A9"
    assert fetcher._pins.pins == {}  # no address stays pinned once its fetches are over


def _self_signed(tmp_path, host: str):
    """A throw-away certificate for ``host`` (websim's, as its https hosts serve)."""
    from raycrawl.websim.server import self_signed

    return self_signed([host], tmp_path / "cert.pem", tmp_path / "key.pem", days=1)


async def test_https_dials_pinned_ip_with_sni(tmp_path, fetcher):
    import ssl

    cert, key = _self_signed(tmp_path, "secure.test")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    sni: list[str | None] = []
    ctx.sni_callback = lambda sock, name, c: sni.append(name)
    state = Site()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]
    try:
        fr = await fetcher.fetch(f"https://secure.test:{port}/page", "127.0.0.1")
    finally:
        await runner.cleanup()
    assert fr.error is None and fr.status == 200 and fr.body == PAGE
    assert sni == ["secure.test"] and state.requests[0][1] == f"secure.test:{port}"


async def test_dropped_keepalive_connection_is_not_silently_retried(fetcher):
    """A server that answers once, keeps the connection, then drops it on the next request: the fetcher
    must report the failure rather than re-send at once (that second request would break politeness)."""
    received: list[bytes] = []

    async def handle(reader, writer):
        served = 0
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            received.append(head.split(b"\r\n", 1)[0])
            if served == 0 and b"/first" in head:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/html\r\n\r\nok")
                await writer.drain()
                served += 1
                continue
            break  # drop the connection without answering
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    base = f"http://ka.test:{server.sockets[0].getsockname()[1]}"
    try:
        first = await fetcher.fetch(f"{base}/first", "127.0.0.1")
        second = await fetcher.fetch(f"{base}/second", "127.0.0.1")
    finally:
        server.close()
        await server.wait_closed()
    assert first.status == 200 and second.error == "reset"
    assert received == [b"GET /first HTTP/1.1", b"GET /second HTTP/1.1"]


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "::1", "[fe80::a]", "fe80::a", "::ffff:127.0.0.1", "10.0.0.255",
                                  "h1.test", "a.b.c.1", "1.2.3", "999.1.1.1", "localhost", "xn--bcher-kva.test", "", "[]"])
def test_ip_literal_agrees_with_ipaddress(host):
    """What the fetcher treats as dialled directly (and so checks against the networks) is what the
    stdlib parses as an address."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        expected = True
    except ValueError:
        expected = False
    assert is_ip_literal(host) == expected
