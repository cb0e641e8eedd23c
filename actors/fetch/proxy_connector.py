"""The fetcher's connections through a proxy (core/proxies.py): aiohttp-socks's connector, with
two changes a crawler needs.

* The target a proxy is asked to reach is the address the crawl resolved, pinned and checked
  against the allowed networks (the fetcher's resolver), not a name the proxy would resolve on its
  own: politeness per IP and the network policy stay exact. Only ``socks5h://`` sends the name.
* TLS to an https site through the tunnel names the site (SNI), not the address dialed
  (aiohttp-socks would name the address it was given).

Errors: :func:`proxy_error` says which failures are the proxy's (``proxy``: it could not be
reached, refused us, asked for credentials it did not get) and which the site's (the proxy
reached out and the site refused or did not answer: ``connect``), so that a proxy down is never
held against the sites behind it.
"""

from __future__ import annotations

import ssl as ssl_module
from typing import Any

import python_socks
from aiohttp.abc import AbstractResolver
from aiohttp_socks import ProxyConnector, ProxyType
from aiohttp_socks.connector import _ResponseHandler
from python_socks.async_.asyncio.v2 import Proxy as SocksProxy

from raycrawl.exchange import PROXY
from raycrawl.proxies import Proxy

_TYPES = {"http": ProxyType.HTTP, "https": ProxyType.HTTP, "socks5": ProxyType.SOCKS5, "socks5h": ProxyType.SOCKS5}
# SOCKS5 replies (RFC 1928 §6) that say the proxy tried the site: network/host unreachable,
# connection refused, TTL expired. HTTP CONNECT: 502 and 504 (the proxy's gateway errors).
_SITE_SOCKS = frozenset({3, 4, 5, 6})
_SITE_HTTP = frozenset({502, 504})
_SOCKS_ERRORS = (python_socks.ProxyError, python_socks.ProxyConnectionError, python_socks.ProxyTimeoutError)


def _socks_cause(exc: BaseException) -> BaseException | None:
    cause: BaseException | None = exc
    for _ in range(8):  # (aiohttp wraps what a connector raises: os_error, or the exception's cause)
        if cause is None or isinstance(cause, _SOCKS_ERRORS):
            break
        cause = getattr(cause, "os_error", None) or cause.__cause__ or cause.__context__
    return cause if isinstance(cause, _SOCKS_ERRORS) else None


def proxy_reason(exc: BaseException) -> str:
    """What the proxy (or the way to it) said, for the operator: "Could not connect to proxy …",
    "407 Proxy Authentication Required" (python-socks's words)."""
    cause = _socks_cause(exc) or exc
    return str(cause) or type(cause).__name__


def proxy_error(exc: BaseException) -> str | None:
    """``proxy``, ``connect`` (the site's), or None: not a failure of python-socks (which
    :class:`CrawlProxyConnector` calls directly)."""
    cause = _socks_cause(exc)
    if cause is None:
        return None
    if isinstance(cause, python_socks.ProxyConnectionError | python_socks.ProxyTimeoutError):
        return PROXY  # (the proxy itself could not be reached, or did not answer)
    code = getattr(cause, "error_code", None)
    return "connect" if code in _SITE_SOCKS or code in _SITE_HTTP else PROXY


class CrawlProxyConnector(ProxyConnector):
    """aiohttp-socks's connector dialing what ``resolver`` (the fetcher's pins) says, keep-alive
    connections capped by the fetcher's ``PoliteConnector`` rule (``release``)."""

    def __init__(self, proxy: Proxy, resolver: AbstractResolver, **kwargs: Any) -> None:
        super().__init__(host=proxy.host, port=proxy.port, proxy_type=_TYPES[proxy.scheme],
                         username=proxy.username, password=proxy.password, rdns=proxy.remote_dns,
                         proxy_ssl=ssl_module.create_default_context() if proxy.scheme == "https" else None,
                         **kwargs)
        if not proxy.remote_dns:
            self._resolver = resolver  # (aiohttp-socks's own hands the name on unresolved)

    async def _wrap_create_connection(self, *args: Any, addr_infos: list, req: Any, timeout: Any,
                                      client_error: Any = None, **kwargs: Any) -> tuple[Any, Any]:
        host, port = addr_infos[0][4][0], addr_infos[0][4][1]
        tls = kwargs.get("ssl")
        proxy = SocksProxy(proxy_type=self._proxy_type, host=self._proxy_host, port=self._proxy_port,
                           username=self._proxy_username, password=self._proxy_password, rdns=self._rdns,
                           proxy_ssl=self._proxy_ssl)
        stream = await proxy.connect(dest_host=host, dest_port=port, timeout=timeout.sock_connect)
        if isinstance(tls, ssl_module.SSLContext):
            stream = await stream.start_tls(hostname=kwargs.get("server_hostname") or req.host, ssl_context=tls)
        transport = stream.writer.transport
        protocol = _ResponseHandler(loop=self._loop, writer=stream.writer)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport, protocol
