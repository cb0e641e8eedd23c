"""Proxies: which proxy, if any, a URL's requests go through (settings ``proxy``, ``proxy_rules``,
``proxy_credentials_file``; docs/fetching.md, Proxies).

* ``proxy``: every request goes through it (``http://`` or ``https://``: an HTTP proxy, asked with
  CONNECT; ``socks5://``: the crawl resolves the name and the proxy dials that address;
  ``socks5h://``: the proxy resolves the name, so the crawl's own resolver is never asked for it).
* ``proxy_rules``: ``"PROXY REGEX"`` each, the first whose regular expression is found in the URL
  decides (Browsertrix's proxy rules): PROXY is a proxy URL, or ``direct`` (no proxy); a URL no
  rule matches goes through ``proxy`` (or direct without one). robots.txt goes the way its origin's
  pages go (the rules see ``/robots.txt`` like any path).
* Credentials never in a URL (``ps`` and the settings would show them): ``proxy_credentials_file``
  holds ``user:password`` for ``proxy`` on its first line, or ``PROXY user:password`` lines for
  any proxy; ``$RAYCRAWL_PROXY_CREDENTIALS`` (``user:password``) is ``proxy``'s otherwise. They
  are remembered as secrets (core/credentials.py): no log, report or error message shows them.

The allowed networks still apply to the target: a ``socks5://`` request dials the address the
crawl resolved and checked; a ``socks5h://`` host's name is not resolved here, so only an IP
literal is checked (the proxy decides where a name goes: that is what socks5h is for).

A host whose root URL (``http://NAME/``) the rules send through a ``socks5h://`` proxy is never
looked up by the crawl (no query leaves this machine for it): its address is the placeholder
``proxy:NAME`` (:func:`proxy_resolved`), so the workbench, which groups hosts by address, gives
it an address of its own — the IP delay applies per host, as the crawl cannot know which hosts
share a server — and no WARC record claims an address for it. Its URLs that the rules send
another way fail as ``dns``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from raycrawl.errors import UserError

SCHEMES = ("http", "https", "socks5", "socks5h")
PROXY_RESOLVED = "proxy:"  # the address of a host only its proxy resolves: PROXY_RESOLVED + name
DIRECT = "direct"
CREDENTIALS_ENV = "RAYCRAWL_PROXY_CREDENTIALS"


@dataclass(frozen=True)
class Proxy:
    """A proxy server and how to reach it; ``url`` (no credentials) names it in logs and records."""

    url: str
    scheme: str
    host: str
    port: int
    username: str | None = field(default=None, repr=False, compare=False)
    password: str | None = field(default=None, repr=False, compare=False)

    @property
    def remote_dns(self) -> bool:
        """The proxy resolves host names (socks5h): the crawl sends it the name."""
        return self.scheme == "socks5h"


def parse_proxy(url: str, what: str = "--proxy") -> Proxy:
    """A proxy URL as the settings give it; :class:`UserError` naming ``what`` when it is not one."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise UserError(f"{what}: {url!r} is not a proxy URL") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UserError(f"{what}: {url!r}: the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    if parts.username is not None or parts.password is not None:
        raise UserError(f"{what}: a proxy's credentials go in proxy_credentials_file or ${CREDENTIALS_ENV}, "
                        "never in its URL (ps and the settings show a URL)")
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UserError(f"{what}: {url!r} must be SCHEME://HOST:PORT")
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme, 1080)
    host = parts.hostname
    return Proxy(f"{scheme}://{_netloc(host, port)}", scheme, host, port)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def read_credentials(path: str | None, default: Proxy | None) -> dict[str, tuple[str, str]]:
    """proxy URL → (user, password), from ``path`` (see the module doc) and the environment."""
    from raycrawl.credentials import env_secret, read_secret, remember

    out: dict[str, tuple[str, str]] = {}
    if path:
        read_secret(path, "proxy_credentials_file")  # (its checks: readable, not empty, private)
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            target, _, pair = line.rpartition(" ")
            if target:
                url = parse_proxy(target.strip(), f"proxy_credentials_file line {n}").url
            elif default is not None:
                url = default.url
            else:
                raise UserError(f"proxy_credentials_file line {n}: name the proxy (PROXY user:password): "
                                "no --proxy is given")
            out[url] = _pair(pair, f"proxy_credentials_file line {n}")
            remember(out[url][1])
    if default is not None and default.url not in out and (env := env_secret(CREDENTIALS_ENV)):
        out[default.url] = _pair(env, f"${CREDENTIALS_ENV}")
        remember(out[default.url][1])
    return out


def _pair(text: str, what: str) -> tuple[str, str]:
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise UserError(f"{what}: expected user:password")
    return user, password


class ProxyRules:
    """Which proxy a URL's requests go through (None: direct)."""

    def __init__(self, proxy: str | None = None, rules: list[str] | tuple[str, ...] = (),
                 credentials_file: str | None = None) -> None:
        default = parse_proxy(proxy) if proxy else None
        parsed: list[tuple[re.Pattern[str], Proxy | None]] = []
        for n, rule in enumerate(rules, 1):
            target, _, pattern = rule.strip().partition(" ")
            pattern = pattern.strip()
            if not pattern:
                raise UserError(f"proxy_rules[{n}]: {rule!r} must be \"PROXY REGEX\" (PROXY a proxy URL or direct)")
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise UserError(f"proxy_rules[{n}]: {pattern!r} is not a regular expression ({exc})") from None
            parsed.append((regex, None if target.lower() == DIRECT else parse_proxy(target, f"proxy_rules[{n}]")))
        creds = read_credentials(credentials_file, default)
        self.default = _with(default, creds)
        self.rules = [(regex, _with(p, creds)) for regex, p in parsed]

    def __bool__(self) -> bool:
        return self.default is not None or any(p is not None for _, p in self.rules)

    def resolves(self, name: str) -> bool:
        """The host ``name``'s proxy resolves it (socks5h): the crawl must not (the module doc)."""
        proxy = self.for_url(f"http://{name}/")
        return proxy is not None and proxy.remote_dns

    def for_url(self, url: str) -> Proxy | None:
        for regex, proxy in self.rules:
            if regex.search(url):
                return proxy
        return self.default

    @classmethod
    def of(cls, settings) -> ProxyRules:  # noqa: ANN001 - core/settings.py's Settings
        return cls(settings.proxy, settings.proxy_rules, settings.proxy_credentials_file)


def proxy_resolved(name: str) -> str:
    """The placeholder address of a host its socks5h proxy resolves (the module doc)."""
    return PROXY_RESOLVED + name


def is_proxy_resolved(address: str) -> bool:
    return address.startswith(PROXY_RESOLVED)


def _with(proxy: Proxy | None, creds: dict[str, tuple[str, str]]) -> Proxy | None:
    if proxy is None or proxy.url not in creds:
        return proxy
    user, password = creds[proxy.url]
    return Proxy(proxy.url, proxy.scheme, proxy.host, proxy.port, user, password)
