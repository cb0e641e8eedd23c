"""Fetchers: HTTP GETs over one aiohttp session, many at a time (BUbiNG's fetching threads).

The caller (the workbench) has already resolved the host and decided the fetch is polite; the
fetcher only talks HTTP and classifies what happened. Its contract:

* it dials exactly the ``ip`` it is given (the URL's host name still goes in ``Host`` and TLS SNI),
  and refuses — sending nothing — when the network policy forbids that address;
* it never follows redirects: a 3xx comes back with ``redirect`` = the canonical Location (its
  header bytes read as a browser reads them), which the caller enqueues as a new URL (robots.txt
  redirects are followed by ``actors.fetch.fetch_loop``, one polite request at a time);
* it never raises for network or HTTP trouble: the result's ``error`` names the kind;
* the body is capped twice: ``max_body`` bytes on the wire (``too-large``, body truncated there)
  and ``max_decompressed`` bytes after Content-Encoding (``bomb``, body truncated there);
* ``started``/``ended`` are wall-clock times of the request start and of the end of the
  response (or of the failure) — politeness delays are counted from ``ended``.

Error kinds: ``forbidden-network``, ``bad-url``, ``connect``, ``timeout``, ``reset``, ``tls``,
``bad-response`` (unparseable HTTP), ``too-large``, ``bomb``, ``bad-encoding``, and ``local``: this
process ran out of file descriptors, so nothing reached the host (the caller tries again later and
holds nothing against the host). A complete HTTP response, whatever its status, has ``error`` None.

Connections: a keep-alive connection is kept only when the caller says the host will be visited
again soon (``keep_alive``; otherwise the request says ``Connection: close``), and at most
``max_idle`` idle connections are kept (:class:`PoliteConnector`), so open sockets are bounded by
what politeness can use, not by the number of hosts recently visited.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver

try:
    import brotli
except ImportError:  # brotli is optional: without it "br" is neither advertised nor decoded
    brotli = None

from raycrawl.actors.fetch.proxy_connector import CrawlProxyConnector, proxy_error, proxy_reason
from raycrawl.actors.fetch.shared_cookies import SharedCookies
from raycrawl.exchange import LOCAL, PROXY, REDIRECT_STATUSES, FetchResult
from raycrawl.policies.networks import NetworkPolicy
from raycrawl.proxies import Proxy, ProxyRules, is_proxy_resolved
from raycrawl.site_sessions import REDACTED, LoginForm, SiteSessions
from raycrawl.urls import canonicalize, header_location, is_ip_literal

log = logging.getLogger(__name__)

class _PinnedResolver(AbstractResolver):
    """aiohttp resolver answering from the addresses the crawler resolved itself.

    Keeping the real host name in the URL (rather than dialing ``http://IP/``) keeps the Host
    header, TLS SNI and the keep-alive pool per host right.
    """

    def __init__(self, policy: NetworkPolicy) -> None:
        self.pins: dict[str, list[Any]] = {}  # host → [ip, fetches in flight]: dropped when none is
        self.policy = policy

    def pin(self, host: str, ip: str) -> None:
        entry = self.pins.get(host)
        if entry is None:
            self.pins[host] = [ip, 1]
        else:
            entry[0] = ip  # the latest answer wins; every pinned address passed the policy
            entry[1] += 1

    def unpin(self, host: str) -> None:
        entry = self.pins.get(host)
        assert entry is not None and entry[1] > 0, host
        entry[1] -= 1
        if entry[1] == 0:
            del self.pins[host]

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        entry = self.pins.get(host.lower())
        ip = entry[0] if entry is not None else None
        if ip is None or not self.policy.allows(ip):
            raise OSError(f"no pinned (or no allowed) address for {host}")
        return [{"hostname": host, "host": ip, "port": port, "family": socket.AF_INET, "proto": 0,
                 "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        pass


_CORRUPT: tuple[type[Exception], ...] = (zlib.error, ValueError) + ((brotli.error,) if brotli is not None else ())


class _BombError(Exception):
    """Decoding went past the cap; args[0] is the output up to the cap."""


class _CorruptError(Exception):
    """The compressed stream is not valid for its Content-Encoding."""


class _Decoder:
    """Incremental Content-Encoding decoder that refuses to inflate past ``limit`` bytes."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.encoding = encoding
        self.remaining = limit
        self._deflate_raw = False
        if encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj()
        elif encoding == "br" and brotli is not None:
            self._br = brotli.Decompressor()
        else:
            raise ValueError(encoding)

    def feed(self, data: bytes) -> bytes:
        """Decoded bytes for ``data``; raises _BombError past the limit, _CorruptError on a bad stream."""
        try:
            return self._feed(data)
        except _CORRUPT as e:
            raise _CorruptError(str(e)) from None

    def _feed(self, data: bytes) -> bytes:
        if self.encoding == "br":
            out = [self._br.process(data, output_buffer_limit=self.remaining + 1)]
            while not self._br.can_accept_more_data() and sum(map(len, out)) <= self.remaining:
                out.append(self._br.process(b"", output_buffer_limit=self.remaining + 1))
            return self._take(b"".join(out))
        try:
            chunk = self._z.decompress(data, self.remaining + 1)
        except zlib.error:
            if self.encoding != "deflate" or self._deflate_raw:
                raise
            # Some servers send raw deflate without the zlib wrapper.
            self._deflate_raw = True
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            chunk = self._z.decompress(data, self.remaining + 1)
        out = [chunk]
        while self._z.unconsumed_tail and len(chunk) <= self.remaining:
            chunk = self._z.decompress(self._z.unconsumed_tail, self.remaining + 1)
            out.append(chunk)
        return self._take(b"".join(out))

    def _take(self, data: bytes) -> bytes:
        if len(data) > self.remaining:
            raise _BombError(data[: self.remaining])
        self.remaining -= len(data)
        return data


_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


def _classify(exc: BaseException) -> str:
    """Error kind of an exception raised while fetching."""
    if getattr(getattr(exc, "os_error", exc), "errno", None) in _OUT_OF_FILES:
        return LOCAL
    if (kind := proxy_error(exc)) is not None:
        return kind
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError | aiohttp.ConnectionTimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return "tls"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | ConnectionResetError):
        return "reset"
    if isinstance(exc, aiohttp.ClientResponseError):
        return "bad-response"
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return "bad-url"
    if isinstance(exc, aiohttp.ClientOSError | OSError):
        return "reset" if getattr(exc, "errno", None) in (104, 32) else "connect"
    return "bad-response"


class _IdleCap:
    """A cap on a connector's idle keep-alive connections: past ``max_idle``, the one idle longest
    is closed (aiohttp itself keeps every idle connection for the keep-alive time)."""

    _conns: Any
    max_idle: int

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        idle = self.idle()
        while idle > self.max_idle:
            oldest = min(self._conns, key=lambda k: self._conns[k][0][1])
            proto, _ = self._conns[oldest].popleft()
            if not self._conns[oldest]:
                del self._conns[oldest]
            proto.close()
            idle -= 1

    def idle(self) -> int:
        """Idle keep-alive connections held now."""
        return sum(len(conns) for conns in self._conns.values())


class PoliteConnector(_IdleCap, aiohttp.TCPConnector):
    """aiohttp's connector with :class:`_IdleCap`."""

    def __init__(self, *args: Any, max_idle: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_idle = max_idle
        assert hasattr(self, "_conns") and hasattr(self, "_release"), "aiohttp changed: check PoliteConnector"


class PoliteProxyConnector(_IdleCap, CrawlProxyConnector):
    """The connector through a proxy (actors/fetch/proxy_connector.py), with :class:`_IdleCap`."""

    def __init__(self, proxy: Proxy, resolver: AbstractResolver, *, max_idle: int, **kwargs: Any) -> None:
        super().__init__(proxy, resolver, **kwargs)
        self.max_idle = max_idle


class Fetcher:
    """Many concurrent GETs over one keep-alive aiohttp session. Create and use inside one event loop."""

    def __init__(
        self,
        user_agent: str,
        connect_timeout: float,
        read_timeout: float,
        max_body: int,
        max_decompressed: int,
        network_policy: NetworkPolicy,
        *,
        total_timeout: float | None = None,
        max_connections: int = 512,
        keepalive_timeout: float = 15.0,
        max_idle: int = 256,
        accept: str = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,*/*;q=0.5",
        proxies: ProxyRules | None = None,
        sessions: SiteSessions | None = None,
    ) -> None:
        """``total_timeout`` bounds a whole exchange (slow-drip servers); default
        connect + 3 × read timeout. ``proxies``: which requests go through which proxy
        (core/proxies.py; None: all direct); ``sessions``: the headers given sites get
        (core/site_sessions.py)."""
        assert max_body > 0 and max_decompressed > 0
        self.user_agent = user_agent
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout if total_timeout is not None else connect_timeout + 3 * read_timeout
        self.max_body = max_body
        self.max_decompressed = max_decompressed
        self.policy = network_policy
        self.max_connections = max_connections
        self.keepalive_timeout = keepalive_timeout
        self.max_idle = max_idle
        self.headers = {"User-Agent": user_agent, "Accept": accept,
                        "Accept-Encoding": "gzip, deflate, br" if brotli is not None else "gzip, deflate"}
        self._pins = _PinnedResolver(network_policy)
        self.proxies = proxies if proxies else None
        self.proxy_reasons: dict[str, str] = {}  # proxy URL → what its last failure said
        self.sessions = sessions if sessions is not None and sessions.sites else None
        # The cookies of the sites whose session keeps them (aiohttp's RFC 6265 jar; any other site
        # neither sends nor keeps one: the session's own jar is a dummy).
        self.cookies = aiohttp.CookieJar(unsafe=True, quote_cookie=False) if self.sessions is not None else None
        # The jar shared with every other fetcher of the crawl (actors/fetch/shared_cookies.py), if any.
        self.cookie_sync: SharedCookies | None = None
        self._sessions: dict[str, aiohttp.ClientSession] = {}  # by proxy URL ("": direct)
        self.requests = 0  # HTTP requests actually sent
        # Asked right before each request is sent: False, and nothing is sent (error ``local``, as if
        # the request had found no file descriptor). The fetch loop's lease (actors/cluster/lease.py).
        self.gate: Callable[[], bool] | None = None

    def _get_session(self, proxy: Proxy | None = None) -> aiohttp.ClientSession:
        key = proxy.url if proxy is not None else ""
        session = self._sessions.get(key)
        if session is None or session.closed:
            options: dict[str, Any] = {
                "max_idle": self.max_idle,
                "use_dns_cache": False,  # the pins are the cache; aiohttp must ask them every time
                "limit": self.max_connections,
                "keepalive_timeout": self.keepalive_timeout,
                "ssl": False,  # crawlers archive what servers send, valid certificate or not
                "family": socket.AF_INET,
                "happy_eyeballs_delay": None,
            }
            connector = (PoliteConnector(resolver=self._pins, **options) if proxy is None
                         else PoliteProxyConnector(proxy, self._pins, **options))
            session = self._sessions[key] = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # no state carried between pages
                auto_decompress=False,  # we decode ourselves, to cap the decoded size
                timeout=aiohttp.ClientTimeout(
                    total=self.total_timeout, sock_connect=self.connect_timeout, sock_read=self.read_timeout
                ),
                headers=self.headers,
                skip_auto_headers=("User-Agent",),
            )
            # aiohttp silently re-sends an idempotent request at once when a reused keep-alive
            # connection drops: a second request to the host within a millisecond, i.e. a politeness
            # violation. Retries are the frontier's business (with back-off), so switch it off.
            assert hasattr(session, "_retry_connection"), "aiohttp changed: check persistent-connection retry"
            session._retry_connection = False
        return session

    async def fetch(self, url: str, ip: str, *, max_body: int | None = None,
                    headers: dict[str, str] | None = None, keep_alive: bool = True,
                    form: LoginForm | None = None) -> FetchResult:
        """GET ``url`` by dialing ``ip``, with ``headers`` added to the session's (a revisit's
        validators); ``keep_alive`` False: the connection closes after the response (the host is
        not visited again soon); ``form``: POST that login form instead (core/site_sessions.py),
        archived with its secret as ***. Never raises (except on cancellation); see the module doc."""
        max_body = self.max_body if max_body is None else max_body
        fr = FetchResult(url=url, ip=ip, started=time.time())
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
            if parts.scheme not in ("http", "https") or not host:
                raise ValueError(f"not an http(s) URL: {url!r}")
        except ValueError:
            fr.error, fr.ended = "bad-url", time.time()
            return fr
        if is_ip_literal(host):
            fr.ip = ip = host.strip("[]")  # aiohttp dials a literal directly: check what is dialed
        proxy = self.proxies.for_url(url) if self.proxies is not None else None
        if is_proxy_resolved(ip):
            fr.ip = ""  # its proxy resolves the name: no address is ours to record (WARC-IP-Address)
            if proxy is None or not proxy.remote_dns:  # (a rule sends this URL of it another way)
                fr.error, fr.ended = "dns", time.time()
                return fr
        if self.gate is not None and not self.gate():
            fr.error, fr.ended = LOCAL, time.time()
            return fr
        if not self.policy.allows(ip):
            log.debug("refusing %s: %s is outside the allowed networks (%s)", url, ip, self.policy.describe())
            fr.error, fr.ended = "forbidden-network", time.time()
            return fr
        self._pins.pin(host, ip)
        secret: frozenset[str] = frozenset()
        keep_cookies, set_cookies = False, []
        if self.sessions is not None:
            extra, secret, keep_cookies, start = self.sessions.for_url(url)
            if keep_cookies and self.cookie_sync is not None:
                await self.cookie_sync.before()
            if keep_cookies and (cookie := self._cookie_header(url, start)):
                extra = {**extra, "Cookie": cookie}
            if extra:
                headers = {**extra, **(headers or {})}
        if not keep_alive:
            headers = {**(headers or {}), "Connection": "close"}
        method = "GET" if form is None else "POST"
        if form is not None:
            headers = {**(headers or {}), "Content-Type": "application/x-www-form-urlencoded"}
        fr.request_head = self._request_head(parts, None, method=method)
        fr.via = proxy.url if proxy is not None else None
        try:
            self.requests += 1
            async with self._get_session(proxy).request(
                method, yarl.URL(url, encoded=True), allow_redirects=False, read_until_eof=True, headers=headers,
                data=form.body() if form is not None else None,
            ) as resp:
                fr.request_head = self._request_head(parts, resp.request_info.headers, secret, method)
                if form is not None:  # the body as archived: the secret field's value as ***
                    fr.request_head += form.body(shown=True)
                    secret = secret | {f"form field {form.secret_field}"}
                if secret:
                    fr.redacted = tuple(sorted(secret))
                self._take_head(fr, resp)
                if keep_cookies and self.cookies is not None:
                    set_cookies = resp.headers.getall("Set-Cookie", [])
                    self.cookies.update_cookies_from_headers(set_cookies, resp.url)
                if not keep_alive and resp.connection is not None:
                    resp.connection.protocol.force_close()  # whether or not the server closes it
                # Even when Content-Length announces too much, the first max_body bytes are kept
                # (robots.txt needs its first 500 KiB; a truncated page is still worth its links).
                await self._read_body(fr, resp, max_body)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the contract is "never raises", errors are data
            fr.error = _classify(e)
            log.debug("fetch %s via %s: %s (%r)", url, ip, fr.error, e)
            if fr.error == PROXY and fr.via is not None:
                self.proxy_reasons[fr.via] = proxy_reason(e)
        finally:
            self._pins.unpin(host)
        fr.ended = time.time()
        if set_cookies and self.cookie_sync is not None:  # (after the exchange: a slow Redis delays no read)
            await self.cookie_sync.after(set_cookies, url)
        return fr

    async def _read_body(self, fr: FetchResult, resp: aiohttp.ClientResponse, max_body: int) -> None:
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        decoder = None
        if encoding not in ("", "identity"):
            try:
                decoder = _Decoder(encoding, self.max_decompressed)
            except ValueError:
                fr.error = "bad-encoding"
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.content.iter_any():
                fr.wire_bytes += len(chunk)
                if fr.wire_bytes > max_body:
                    chunk = chunk[: len(chunk) - (fr.wire_bytes - max_body)]
                    fr.wire_bytes = max_body
                    fr.error, fr.truncated = "too-large", "length"
                if decoder is not None:
                    chunk = decoder.feed(chunk)
                elif size + len(chunk) > self.max_decompressed:
                    raise _BombError(chunk[: self.max_decompressed - size])
                parts.append(chunk)
                size += len(chunk)
                if fr.truncated:
                    resp.close()
                    break
        except _BombError as e:
            parts.append(e.args[0])
            fr.error, fr.truncated = "bomb", "length"
            resp.close()
        except _CorruptError:
            fr.error = "bad-encoding"  # keep what decoded before the corruption
            resp.close()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            # The body ended before its framing said (Content-Length not reached, a broken chunked
            # stream, a reset or a timeout mid-body): what arrived is kept, and said to be cut.
            fr.truncated = "time" if _classify(exc) == "timeout" else "disconnect"
            raise
        finally:
            fr.body = b"".join(parts)

    def _take_head(self, fr: FetchResult, resp: aiohttp.ClientResponse) -> None:
        fr.status = resp.status
        fr.http_version = f"HTTP/{resp.version.major}.{resp.version.minor}" if resp.version else "HTTP/1.1"
        fr.status_line = f"{fr.http_version} {resp.status} {resp.reason or ''}".rstrip()
        fr.raw_headers = list(resp.raw_headers)
        headers: dict[str, str] = {}
        for name, value in resp.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        fr.headers = headers
        fr.ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if resp.status in REDIRECT_STATUSES:
            # The header's bytes, not aiohttp's str (non-UTF-8 bytes would make it an invalid URL).
            raw = next((v for k, v in fr.raw_headers if k.lower() == b"location"), None)
            fr.redirect = canonicalize(header_location(raw), base=fr.url) if raw is not None else None

    def _request_head(self, parts: Any, sent: Any, secret: frozenset[str] = frozenset(), method: str = "GET") -> bytes:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"{method} {target} HTTP/1.1"]
        if sent is not None:
            hidden = {name.lower() for name in secret}  # (what the archive keeps of a secret header)
            lines += [f"{k}: {REDACTED if k.lower() in hidden else v}" for k, v in sent.items()]
        else:
            lines.append(f"Host: {parts.netloc.rsplit('@', 1)[-1]}")
            lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")

    def _cookie_header(self, url: str, start: dict[str, str]) -> str:
        """The Cookie header for ``url``: the jar's cookies for it, and the site's starting ones it
        has not replaced."""
        assert self.cookies is not None
        jar = self.cookies.filter_cookies(yarl.URL(url, encoded=True))
        pairs = {name: morsel.value for name, morsel in jar.items()}
        return "; ".join(f"{k}={v}" for k, v in {**start, **pairs}.items())

    def idle_connections(self) -> int:
        return sum(s.connector.idle() for s in self._sessions.values() if not s.closed and s.connector is not None)

    async def close(self) -> None:
        """Close the sessions and their keep-alive connections (the fetcher can be reused afterwards)."""
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()
