"""Who a server of raycrawl answers (the console, the search page): requests for the names it was
started for and, off loopback, with a bearer token.

A web page the operator visits can make the operator's browser talk to a server on loopback: with
DNS rebinding the page's own name resolves to 127.0.0.1, and its requests carry that name in
``Host`` and ``Origin`` (a same-origin check passes them: the console was paused that way). A server
that answers only the names it was started for is out of that page's reach, as Jupyter's and
Grafana's are: ``localhost`` and its subdomains (browsers resolve them to loopback themselves), IP
literals that are loopback or the bound address (any IP literal when bound to every address: a
browser sends a literal only when it was pointed at one), the ``--host`` name, and each
``--allow-host``.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
from collections.abc import Iterable
from pathlib import Path

from raycrawl.credentials import is_loopback, remember
from raycrawl.errors import UserError

TOKEN_COOKIE = "raycrawl_token"


def host_name(value: str) -> str:
    """The name in a ``Host`` header or an origin's authority: ``Example.ORG.:8099`` →
    ``example.org``, ``[::1]:80`` → ``::1``."""
    v = value.strip().lower()
    if v.startswith("["):
        return v[1:v.find("]")] if "]" in v else v
    if v.count(":") == 1:
        v = v.split(":", 1)[0]
    return v.rstrip(".")


class Names:
    """The names a server bound to ``bind`` answers to (``allow``: more of them)."""

    def __init__(self, bind: str, allow: Iterable[str] = ()) -> None:
        self.names = {host_name(n) for n in (bind, *allow)} | {"localhost"}
        try:
            self.bind_ip = ipaddress.ip_address(host_name(bind))
        except ValueError:
            self.bind_ip = None
        self.everywhere = self.bind_ip is not None and self.bind_ip.is_unspecified

    def allows(self, value: str) -> bool:
        """``value`` (a Host header, or an origin's authority) names this server."""
        name = host_name(value)
        if name in self.names or name.endswith(".localhost"):
            return True
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            return False
        return ip.is_loopback or self.everywhere or ip == self.bind_ip


def read_tokens(path: Path) -> dict[str, str]:
    """token → label, from a file that only its owner can read (lines ``LABEL TOKEN`` or ``TOKEN``)."""
    try:
        if path.stat().st_mode & 0o077:
            raise UserError(f"--token-file {path}: readable by others; chmod 600 it")
        lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    except OSError as exc:
        raise UserError(f"--token-file {path}: {exc.strerror or exc}") from None
    tokens = {}
    for words in lines:
        label, token = (words[0], words[1]) if len(words) == 2 else ("token", words[0])
        if len(token) < 16:
            raise UserError(f"--token-file {path}: a token must have at least 16 characters")
        tokens[token] = label
        remember(token)  # scrubbed from this process's logs and messages
    if not tokens:
        raise UserError(f"--token-file {path}: no token in it")
    return tokens


def add_guard_options(p, what: str) -> None:  # noqa: ANN001 - an argparse parser
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs --token-file)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help=f"another name the {what} answers to (it answers only to loopback names, IP literals of "
                   "its address and --host; any other Host header gets 403: DNS rebinding); repeatable")
    p.add_argument("--token-file", type=Path,
                   help="API tokens, one per line: LABEL TOKEN (or TOKEN alone); chmod 600")


def tokens_for(host: str, token_file: Path | None, command: str) -> dict[str, str] | None:
    """The tokens a server on ``host`` requires (None: none, on loopback), or one clear line."""
    tokens = read_tokens(token_file) if token_file else None
    if tokens is None and not is_loopback(host):
        raise UserError(f"{command}: --host {host} is not loopback: give --token-file (see --help)")
    return tokens


def who(request, tokens: dict[str, str] | None, anonymous: str) -> str | None:  # noqa: ANN001 - aiohttp
    """The caller's label (``anonymous`` when no token is required), or None: a token is required
    and the request has none of them."""
    if tokens is None:
        return anonymous
    auth = request.headers.get("Authorization", "")
    given = auth[7:] if auth.startswith("Bearer ") else request.cookies.get(TOKEN_COOKIE, "")
    for token, label in tokens.items():
        if hmac.compare_digest(given.encode(), token.encode()):
            return label
    return None


@functools.cache
def who_key():  # noqa: ANN201 - an aiohttp RequestKey
    """Where :func:`guard` puts the caller's label in a request (``request[who_key()]``)."""
    from aiohttp import web

    return web.RequestKey("who", str)


def guard(names: Names, tokens: dict[str, str] | None, anonymous: str):  # noqa: ANN201 - an aiohttp middleware
    """The middleware: 403 for a name the server was not started for (GET and POST alike) or a POST
    from another origin; 401 without a token when tokens are required; ``/?token=T`` sets the
    token's cookie once. The caller's label is ``request[who_key()]``."""
    from aiohttp import web

    @web.middleware
    async def middleware(request, handler):  # noqa: ANN001, ANN202
        if not names.allows(request.host):
            raise web.HTTPForbidden(text="this server does not answer to that name (see --allow-host)")
        origin = request.headers.get("Origin")
        sender = None if origin in (None, "null") else origin.split("://", 1)[-1]  # (its authority)
        if sender is not None and not names.allows(sender):
            raise web.HTTPForbidden(text="cross-origin request refused")
        if tokens is not None and request.path == "/" and "token" in request.query:
            if tokens.get(request.query["token"]) is None:
                raise web.HTTPUnauthorized(text="wrong token")
            resp = web.HTTPSeeOther("/")
            resp.set_cookie(TOKEN_COOKIE, request.query["token"], httponly=True, samesite="Strict")
            raise resp
        label = who(request, tokens, anonymous)
        if label is None:
            raise web.HTTPUnauthorized(text="a bearer token is required", headers={"WWW-Authenticate": "Bearer"})
        if request.method == "POST" and sender is not None and sender != request.host:
            raise web.HTTPForbidden(text="cross-origin request refused")
        request[who_key()] = label
        return await handler(request)

    return middleware


def check_bind(host: str, port: int) -> None:
    """The address can be bound (the machine has it, the port is free), or one clear line."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
