"""The in-vitro web's HTTP server: one aiohttp app, one port, bound to each served loopback IP.

With ``https_hosts`` N, the N most popular plain hosts answer https too, on a second port (every
IP, a self-signed certificate naming them): a site on both schemes, as most of today's web is,
with about half the links to it under https (:meth:`websim.render.Renderer.link_url`).

Virtual hosting by the Host header. Every request is logged (see :mod:`websim.request_log`)
with the local address of its socket, so the audit knows which IP the client dialed.
:class:`WebsimServer` runs in the current event loop; :func:`serve_forever` is the process
entry point used by ``raycrawl websim serve`` and by :class:`websim.Websim`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import socket
import struct
import time
from collections import deque
from pathlib import Path

from aiohttp import web

from raycrawl.urls import canonicalize, split_host
from raycrawl.websim.dns import hosts_file_text, start_dns
from raycrawl.websim.manifest import build_records, write_manifest
from raycrawl.websim.members import MembersArea
from raycrawl.websim.model import SESSION_PARAM, Host, WebModel, ip_address, repeat_segment
from raycrawl.websim.render import (
    SITEMAP_PATH,
    Renderer,
    Response,
    gzip_bomb,
    not_found,
    not_modified,
)
from raycrawl.websim.request_log import RequestLogWriter

log = logging.getLogger(__name__)

#: Seconds a "slow" host waits before answering.
SLOW_DELAY = 1.5
#: A "loaded" host answers in LOADED_BASE × (1 + the requests to it begun in the last LOADED_WINDOW
#: seconds): a server whose response time rises with the load a crawler puts on it.
LOADED_BASE = 0.02
LOADED_WINDOW = 2.0
#: A hung request is abandoned by the server after this long (the client normally gives up first).
HANG_LIMIT = 300.0
_CALENDAR = re.compile(r"^/calendar/(\d{4})/(\d{2})/$")
_STREAM_CHUNK = 64 * 1024
_ONE_SEND = 256 * 1024  # bodies up to this size leave in one send on loopback


def _bind_all(ips: list[str], port: int) -> list[socket.socket]:
    socks = []
    try:
        for ip in ips:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            socks.append(s)
            s.bind((ip, port))
            s.listen(1024)
            s.setblocking(False)
    except OSError:
        for s in socks:
            s.close()
        raise
    return socks


def bind_port(ips: list[str], port: int = 0, attempts: int = 50) -> tuple[int, list[socket.socket]]:
    """Listening sockets on ``port`` for every IP; with port 0, a port free on all of them."""
    if port:
        return port, _bind_all(ips, port)
    for _ in range(attempts):
        probe = socket.socket()
        probe.bind((ips[0], 0))
        candidate = probe.getsockname()[1]
        probe.close()
        try:
            return candidate, _bind_all(ips, candidate)
        except OSError:
            continue
    raise OSError(f"no port free on all of {len(ips)} addresses after {attempts} attempts")


class WebsimServer:
    """Serves ``model`` on the loopback IPs; ``start()``/``stop()`` inside a running event loop."""

    def __init__(self, model: WebModel, out_dir: str | Path, port: int = 0, dns_port: int = 0,
                 slow_delay: float = SLOW_DELAY, prerender: bool = False, https_hosts: int = 0,
                 loaded_hosts: int = 0, members_hosts: int = 0) -> None:
        """``loaded_hosts``: that many hosts without a fault (the first, in the model's order) slow
        down under load (LOADED_BASE); websim.json names them (``loaded``). ``members_hosts``: the
        next that many are members areas behind a form login (websim/members.py; ``members``)."""
        self.model = model
        self.https_hosts = https_hosts
        self.out_dir = Path(out_dir)
        self.requested_port, self.dns_port = port, dns_port
        self.slow_delay = slow_delay
        self.prerender = prerender
        self.port = 0
        self.dns_address: tuple[str, int] | None = None
        self.renderer: Renderer | None = None
        self.log: RequestLogWriter | None = None
        self._runner: web.AppRunner | None = None
        self._dns_transport: asyncio.DatagramTransport | None = None
        self._flusher: asyncio.Task | None = None
        self._repeat: dict[str, str] = {}
        self._bomb: asyncio.Future | None = None
        self.ips = [ip_address(i, model.net) for i in range(model.n_ips)]
        plain = [h.name for h in model.hosts if not h.fault]
        self.loaded: dict[str, deque[float]] = {name: deque() for name in plain[:loaded_hosts]}
        # (a members area: the form-login hosts, then one behind basic authentication)
        self.members = MembersArea(plain[loaded_hosts:loaded_hosts + members_hosts], self.out_dir / "leaks.log",
                                   plain[loaded_hosts + members_hosts:loaded_hosts + members_hosts + 1]) \
            if members_hosts else None

    @property
    def paths(self) -> dict[str, Path]:
        d = self.out_dir
        return {"manifest": d / "manifest.jsonl.gz", "request_log": d / "requests.log", "hosts_file": d / "hosts",
                "seeds": d / "seeds.txt", "info": d / "websim.json"}

    async def start(self) -> dict:
        """Bind, write manifest/hosts/seeds files, start serving. Returns the info dict."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        port, socks = bind_port(self.ips, self.requested_port)
        self.port = port
        both = both_scheme_hosts(self.model, self.https_hosts)
        tls_port, tls_socks = bind_port(self.ips) if both else (0, [])
        self.renderer = Renderer(self.model, port, tls_port, both)
        self._repeat = {h.name: repeat_segment(self.model, h) for h in self.model.hosts if h.trap == "repeat"}
        records = {h.name: h.ip for h in self.model.hosts}
        self._dns_transport, _ = await start_dns(records, self.ips[0], self.dns_port)
        self.dns_address = self._dns_transport.get_extra_info("sockname")[:2]
        paths = self.paths
        write_manifest(build_records(self.model, self.renderer, self.dns_address), paths["manifest"])
        paths["hosts_file"].write_text(hosts_file_text(records))
        seeds = [self.renderer.url(h, p) for h, p in self.model.seeds()]
        paths["seeds"].write_text("".join(s + "\n" for s in seeds))
        if self.prerender:  # pay the rendering before serving, so a crawl sees only cache hits
            t = time.perf_counter()
            n = sum(1 for h in self.model.hosts for p in h.pages.values()
                    if p.kind == "html" and self.renderer.response(h, p))
            log.info("pre-rendered %d pages in %.1f s", n, time.perf_counter() - t)
        self.log = RequestLogWriter(paths["request_log"])
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        for s in socks:
            await web.SockSite(self._runner, s, shutdown_timeout=1.0).start()
        if tls_socks:
            tls = tls_context(sorted(both), self.out_dir)
            for s in tls_socks:
                await web.SockSite(self._runner, s, shutdown_timeout=1.0, ssl_context=tls).start()
        loop = asyncio.get_running_loop()
        self._flusher = loop.create_task(self._flush_every(1.0))
        # zlib releases the GIL: the 128 MiB gzip bomb compresses beside the serving loop.
        self._bomb = loop.run_in_executor(None, gzip_bomb)
        info = {"port": port, "tls_port": tls_port, "https_hosts": sorted(both), "loaded": sorted(self.loaded),
                "members": self.members.info() if self.members else None,
                "ips": self.ips, "dns": list(self.dns_address),
                **{k: str(v) for k, v in paths.items()}, "seed_urls": seeds}
        tmp = paths["info"].with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=1))
        tmp.replace(paths["info"])
        log.info("websim serving %d hosts on %d IPs, port %d, DNS %s", self.model.n_hosts, len(self.ips), port,
                 self.dns_address)
        return info

    @staticmethod
    def _load_delay(recent: deque[float]) -> float:
        """A loaded host's response time for a request begun now (``recent``: its requests' starts)."""
        now = time.time()
        while recent and recent[0] < now - LOADED_WINDOW:
            recent.popleft()
        recent.append(now)
        return LOADED_BASE * len(recent)

    async def stop(self) -> None:
        if self._flusher:
            self._flusher.cancel()
        if self._bomb is not None:
            await self._bomb
        if self._runner:
            await self._runner.cleanup()
        if self._dns_transport:
            self._dns_transport.close()
        if self.log:
            self.log.flush()

    def flush(self) -> None:
        if self.log:
            self.log.flush()

    async def _flush_every(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.flush()

    # ------------------------------------------------------------------ requests
    def lookup(self, host: Host, target: str) -> Response:
        """The response for ``target`` (path and query as sent) on ``host``, faults aside."""
        assert self.renderer is not None
        page = host.pages.get(target)  # fast path: most clients send the canonical spelling
        if page is not None and host.trap != "session":
            return self.renderer.response(host, page)
        canon = canonicalize("http://h.test" + (target if target.startswith("/") else "/" + target))
        if canon is None:
            return Response(400, "text/plain", b"bad request target")
        path = split_host(canon)[1]
        if path == "/robots.txt":
            return self.renderer.robots(host)
        if path == SITEMAP_PATH:
            return self.renderer.sitemap(host)
        if path == "/robots-moved.txt":
            return self.renderer.moved_robots(host) or not_found()
        if path.startswith("/robots-for/") and path.endswith(".txt"):
            return self.renderer.partner_robots(host, path[len("/robots-for/"):-4]) or not_found()
        sid = ""
        if host.trap == "session" and "?" in path:
            base, _, query = path.partition("?")
            kept = []
            for pair in query.split("&"):
                if pair.startswith(SESSION_PARAM + "="):
                    sid = pair[len(SESSION_PARAM) + 1:]
                else:
                    kept.append(pair)
            path = base + ("?" + "&".join(kept) if kept else "")
        page = host.pages.get(path)
        if page is not None:
            return self.renderer.response(host, page, sid)
        if host.trap == "calendar" and (m := _CALENDAR.match(path)):
            year, month = int(m.group(1)), int(m.group(2))
            if 1 <= month <= 12 and 1000 <= year <= 9999:
                return self.renderer.calendar(host, year, month)
        if host.trap == "repeat":
            seg = self._repeat[host.name]  # "w1/w2/": the trap serves /w1/w2/, /w1/w2/w1/w2/, ...
            if len(path) > 1 and path == "/" + seg * ((len(path) - 1) // len(seg)):
                return self.renderer.repeat(host, path, seg)
        return not_found()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = time.time()
        assert self.log is not None
        transport = request.transport
        sockname = transport.get_extra_info("sockname") if transport else None
        ip = sockname[0] if sockname else "-"
        peername = transport.get_extra_info("peername") if transport is not None else None
        peer = peername[0] if peername else "-"
        host_header = request.headers.get("Host", "")
        target = request.raw_path
        name = host_header.rsplit(":", 1)[0].lower().rstrip(".") if host_header else ""
        host = self.model.by_name.get(name)
        status, nbytes = 0, 0
        end: float | None = None
        try:
            if host is None:
                resp = Response(404, "text/plain", b"no such host here")
            elif host.fault == "hang":
                await self._hang(request)
                raise _Dropped
            else:
                if host.fault == "slow":
                    await asyncio.sleep(self.slow_delay)
                elif host.name in self.loaded:
                    await asyncio.sleep(self._load_delay(self.loaded[host.name]))
                if target.startswith("/big/bomb") and self._bomb is not None:
                    await self._bomb  # built in a worker thread at start: never block the loop
                gate = None
                if self.members is not None:
                    body = await request.read() if request.method == "POST" else b""
                    gate = self.members.gate(host.name, request.method, target, dict(request.cookies), body,
                                             request.headers.get("Authorization", ""))
                resp = gate if gate is not None else self.lookup(host, target)
            if resp.reset:
                _reset(request)
                raise _Dropped
            if resp.cut:
                # Logged with status 0, as a reset is: the response never completed (an audit must
                # not count it as answered, so a crawler may try it again).
                nbytes, end = _send_cut(request, resp), time.time()
                raise _Dropped
            if resp.raw_headers:
                # Header bytes aiohttp would re-encode as UTF-8: written by hand, then the connection closes.
                head = [f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Status')}".encode(),
                        f"Content-Type: {resp.ctype or 'text/html'}".encode(),
                        f"Content-Length: {len(resp.body)}".encode(), b"Connection: close"]
                head += [name.encode() + b": " + value for name, value in resp.raw_headers]
                status, nbytes, end = resp.status, len(resp.body), time.time()
                assert transport is not None
                transport.write(b"\r\n".join(head) + b"\r\n\r\n" + resp.body)
                transport.close()
                raise _Dropped
            if resp.stream_bytes:
                out = web.StreamResponse(status=resp.status, headers={"Content-Type": resp.ctype or "text/html"})
                await out.prepare(request)
                status = resp.status
                chunk = b"<html><body>" + b"x" * (_STREAM_CHUNK - 12)
                try:
                    while nbytes < resp.stream_bytes:
                        await out.write(chunk)
                        nbytes += len(chunk)
                    await out.write_eof()
                except (ConnectionError, RuntimeError):
                    pass  # the client stopped reading: what a size-capped crawler does
                return out
            headers = dict(resp.headers)
            if resp.ctype:
                headers["Content-Type"] = resp.ctype
            if not_modified(resp, request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")):
                resp = Response(304, None, b"")
                headers.pop("Content-Type", None)
            out = web.Response(status=resp.status, body=resp.body or None, headers=headers)
            status, nbytes = resp.status, (0 if request.method == "HEAD" else len(resp.body))
            try:
                writer = await out.prepare(request)
                # The end is stamped BEFORE the body is handed to the kernel: the send wakes the
                # client, and on a busy machine this process may not run again for milliseconds,
                # so a stamp taken after it lands late while the client already has its answer
                # (every stamp after the send: 13 gaps 3-9 ms short in one clean clone). A body the
                # kernel took whole in that one write — nothing left in this process's buffer
                # right after it, as loopback takes even a megabyte — ended then too; one that
                # waited for the client to drain the socket is stamped once it has gone.
                writes: list[bool] = []
                if writer is not None and transport is not None:
                    writer.on_body_write = lambda *_: writes.append(not transport.get_write_buffer_size())
                before = time.time()
                await out.write_eof()
                if nbytes <= _ONE_SEND or writes == [True]:
                    end = before
            except (ConnectionError, RuntimeError):
                pass  # the client hung up mid-body: the status line went out, the body was cut
            return out
        except _Dropped:
            raise asyncio.CancelledError from None
        finally:
            self.log.record(start, end if end is not None else time.time(), ip, host_header, target, status, nbytes, peer)

    async def _hang(self, request: web.Request) -> None:
        """Accept, read the request, never answer; return when the client goes away."""
        deadline = time.monotonic() + HANG_LIMIT
        while time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            await asyncio.sleep(0.05)
        _reset(request)


def both_scheme_hosts(model: WebModel, n: int) -> frozenset[str]:
    """The ``n`` most popular plain hosts: those served on both schemes."""
    return frozenset([h.name for h in model.hosts if h.role == "plain"][:n])


def tls_context(names: list[str], out_dir: Path):  # noqa: ANN201 - ssl.SSLContext
    """A server context with a fresh self-signed certificate for ``names`` (kept in ``out_dir``
    for a client that wants to trust it; raycrawl, like most crawlers, does not check it)."""
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*self_signed(names, out_dir / "tls-cert.pem", out_dir / "tls-key.pem"))
    return ctx


def self_signed(names: list[str], cert_path: Path, key_path: Path, days: int = 30) -> tuple[Path, Path]:
    """Write a fresh self-signed certificate for the DNS ``names`` and its key (mode 0600)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if len(names) == 1 else "websim")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def cut_part(body: bytes) -> bytes:
    """What a cutting server sends of ``body`` before it closes the connection: the first third."""
    return body[: len(body) // 3]


def _send_cut(request: web.Request, resp: Response) -> int:
    """A 200 whose body breaks off: ``Content-Length`` of the whole body, or a chunked stream without
    its last chunk; the first third of the body, then the connection closes. Returns bytes sent."""
    part = cut_part(resp.body)
    head = [b"HTTP/1.1 200 OK", f"Content-Type: {resp.ctype or 'text/html'}".encode()]
    if resp.cut == "chunked":
        head.append(b"Transfer-Encoding: chunked")
        data = f"{len(part):x}\r\n".encode() + part + b"\r\n"
    else:
        head.append(f"Content-Length: {len(resp.body)}".encode())
        data = part
    transport = request.transport
    assert transport is not None
    transport.write(b"\r\n".join(head) + b"\r\n\r\n" + data)
    transport.close()
    return len(part)


_REASONS = {301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect",
            308: "Permanent Redirect"}


class _Dropped(Exception):
    """No response is sent for this request."""


def _reset(request: web.Request) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a crashing server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def serve_forever(model: WebModel, out_dir: str | Path, port: int = 0, dns_port: int = 0,
                        ready_file: str | Path | None = None, announce=None,
                        slow_delay: float = SLOW_DELAY, prerender: bool = False, https_hosts: int = 0,
                        loaded_hosts: int = 0, members_hosts: int = 0) -> None:
    """Run until SIGINT/SIGTERM; SIGUSR1 flushes the request log. Writes ``ready_file`` (the
    info JSON) once serving, and calls ``announce(info)`` if given."""
    server = WebsimServer(model, out_dir, port, dns_port, slow_delay=slow_delay, prerender=prerender,
                          https_hosts=https_hosts, loaded_hosts=loaded_hosts, members_hosts=members_hosts)
    info = await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.flush)
    if announce:
        announce(info)
    if ready_file:
        tmp = Path(str(ready_file) + ".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(ready_file)
    try:
        await stop.wait()
    finally:
        await server.stop()
