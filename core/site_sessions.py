"""The session file (setting ``session_file``, TOML): what the crawl sends to a given site, and only
to it (docs/fetching.md, "Headers per site").

    [[site]]
    match = "https://api.example.org/"        # a URL (its host and subdomains; a path narrows it)
    headers = { "Accept-Language" = "fr", "Authorization" = { file = "/etc/raycrawl/api-token" } }

    [[site]]
    match = ["org,example,www)/docs/", "http://example.net/"]   # SURT prefixes or URLs, as scope_allow_surts
    headers = { "X-Api-Key" = { env = "EXAMPLE_API_KEY" } }
    basic_auth = { user = "archive", password = { file = "/etc/raycrawl/example-password" } }
    cookies = { consent = "yes" }      # or true: keep what the site sets (RFC 6265) and send it back

    [[site]]
    match = "https://members.example.org/"
    login = { url = "https://members.example.org/login", fields = { user = "archive" },
              secret_field = "password", secret = { file = "members-password" }, check = "Sign out", tries = 3 }

A site's ``match`` is what ``scope_allow_surts`` takes (core/scope_rules.py): so a redirect to
another host, or a requisite on a CDN, is another site and gets none of these headers. Every site
that matches a URL adds its headers, later sites overriding earlier ones. A value written in the
file is sent as it is and archived; a value read from a file (``{ file = PATH }``, its first line)
or the environment (``{ env = NAME }``) is a secret: remembered for scrubbing (core/credentials.py)
and replaced by ``***`` in the archived request record, whose ``Raycrawl-Redacted`` header names
the headers replaced (the record claims nothing false about the bytes it keeps). ``basic_auth``
(RFC 7617) is a secret ``Authorization`` header made of a user and a secret password.
``cookies``: the site's cookies are kept as a browser keeps them (aiohttp's RFC 6265 jar: domain,
path, expiry, Secure) and sent back to it; a table gives the cookies to start with. Sites without
it get no cookie and keep none.

``login``: a form login (its site keeps cookies). Before the site's first page, and again when a
page comes back as a redirect to the login URL (its session expired), the crawl POSTs ``fields``
and ``secret_field`` = the secret to ``url`` (which must be of the site: credentials go nowhere
else), as its own request to the host, politely; the login worked when its answer is not an error
and, with ``check``, contains that text. After ``tries`` failed logins the site's pages are
recorded as ``login-failed``. The archived request record shows the secret as ``***``.
"""

from __future__ import annotations

import base64
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from raycrawl.errors import UserError

REDACTED = "***"
# Names a request header may have (RFC 9110 §5.1: a token); hop-by-hop and framing ones are the
# fetcher's business.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "keep-alive",
                       "accept-encoding"})


@dataclass
class LoginForm:
    url: str
    fields: dict[str, str]
    secret_field: str
    secret: str = field(repr=False)
    check: str | None = None
    tries: int = 3

    def body(self, shown: bool = False) -> bytes:
        """The form's body (application/x-www-form-urlencoded); ``shown``: as archived, the secret as ***."""
        from urllib.parse import urlencode

        return urlencode({**self.fields, self.secret_field: REDACTED if shown else self.secret}).encode("ascii")


@dataclass
class Site:
    prefixes: list[str]
    headers: dict[str, str] = field(repr=False)
    secret: frozenset[str]
    cookies: bool = False  # keep what the site sets and send it back (RFC 6265)
    start_cookies: dict[str, str] = field(default_factory=dict, repr=False)
    login: LoginForm | None = None


class SiteSessions:
    """The sites of a session file; :meth:`headers_for` what a URL's request adds."""

    def __init__(self, sites: list[Site]) -> None:
        self.sites = sites

    @classmethod
    def read(cls, path: str | Path) -> SiteSessions:
        what = f"session_file {path}"
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"{what}: cannot read ({exc.strerror or exc})") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{what}: not TOML ({exc})") from None
        unknown = set(data) - {"site"}
        if unknown or not isinstance(data.get("site", []), list):
            raise UserError(f"{what}: expected [[site]] tables only, found {sorted(unknown) or 'site ='}")
        base = Path(path).resolve().parent  # (a secret's relative path is the session file's neighbour)
        return cls([_site(entry, f"{what}, site {n}", base) for n, entry in enumerate(data.get("site", []), 1)])

    def for_url(self, url: str) -> tuple[dict[str, str], frozenset[str], bool, dict[str, str]]:
        """What a request of ``url`` gets, from every site that matches it (later sites override
        earlier ones): (headers to add, the names of the secret ones, whether its site keeps
        cookies, the cookies it starts with)."""
        headers: dict[str, str] = {}
        secret: set[str] = set()
        keep, start = False, {}
        if not self.sites:
            return headers, frozenset(), keep, start
        from raycrawl.scope_rules import url_surt

        key = url_surt(url)
        for site in self.sites:
            if any(key.startswith(p) for p in site.prefixes):
                for name, value in site.headers.items():
                    headers[name] = value
                    (secret.add if name in site.secret else secret.discard)(name)
                keep = keep or site.cookies or bool(site.start_cookies)
                start.update(site.start_cookies)
        return headers, frozenset(secret), keep, start

    def login_for(self, url: str) -> tuple[int, LoginForm] | None:
        """The first site matching ``url`` that has a form login (its index, its form), or None."""
        from raycrawl.scope_rules import url_surt

        key = url_surt(url)
        return next(((i, site.login) for i, site in enumerate(self.sites)
                     if site.login is not None and any(key.startswith(p) for p in site.prefixes)), None)

    def headers_for(self, url: str) -> tuple[dict[str, str], frozenset[str]]:
        """(headers to add, the names of those that are secret) for a request of ``url``."""
        return self.for_url(url)[:2]

    def cookies_for(self, url: str) -> tuple[bool, dict[str, str]]:
        """(whether ``url``'s site keeps cookies, the cookies it starts with)."""
        return self.for_url(url)[2:]


def _site(entry: object, what: str, base: Path) -> Site:
    from raycrawl.credentials import remember
    from raycrawl.scope_rules import surt_prefix

    if not isinstance(entry, dict) or set(entry) - {"match", "headers", "basic_auth", "cookies", "login"} \
            or "match" not in entry:
        raise UserError(f"{what}: a site has 'match' (a URL or SURT prefix, or a list of them), 'headers', "
                        "'basic_auth', 'cookies' and 'login'")
    match = entry["match"] if isinstance(entry["match"], list) else [entry["match"]]
    if not match or not all(isinstance(m, str) and m.strip() for m in match):
        raise UserError(f"{what}: 'match' must be a URL or SURT prefix, or a list of them")
    prefixes = [surt_prefix(m) for m in match]
    headers: dict[str, str] = {}
    secret: set[str] = set()
    raw = entry.get("headers", {})
    if not isinstance(raw, dict):
        raise UserError(f"{what}: 'headers' must be a table of header names and values")
    for name, value in raw.items():
        if not _TOKEN.fullmatch(name) or name.lower() in _RESERVED:
            raise UserError(f"{what}: {name!r} is not a header this file may set")
        if isinstance(value, str):
            text = value
        elif isinstance(value, dict) and set(value) in ({"file"}, {"env"}):
            text = _secret(value, f"{what}, header {name}", base)
            secret.add(name)
        else:
            raise UserError(f"{what}, header {name}: a value is a string, {{ file = PATH }} or {{ env = NAME }}")
        if any(ch in text for ch in "\r\n\0"):
            raise UserError(f"{what}, header {name}: the value has a line break")
        headers[name] = text
    if "basic_auth" in entry:  # RFC 7617: the credentials in Authorization, secret as any
        auth = entry["basic_auth"]
        if not isinstance(auth, dict) or set(auth) != {"user", "password"} or not isinstance(auth["user"], str) \
                or ":" in auth["user"] or not isinstance(auth["password"], dict):
            raise UserError(f"{what}: basic_auth = {{ user = NAME, password = {{ file = PATH }} or {{ env = NAME }} }}")
        password = _secret(auth["password"], f"{what}, basic_auth password", base)
        token = base64.b64encode(f"{auth['user']}:{password}".encode()).decode("ascii")
        remember(token)
        headers["Authorization"] = f"Basic {token}"
        secret.add("Authorization")
    cookies = entry.get("cookies", False)
    start: dict[str, str] = {}
    if isinstance(cookies, dict):  # the cookies to start with (kept like any the site sets)
        for name, value in cookies.items():
            if not _TOKEN.fullmatch(name) or not isinstance(value, str) or any(ch in value for ch in ";\r\n\0"):
                raise UserError(f"{what}: cookie {name!r}: a name is a token, a value a string without ';'")
            start[name] = value
        cookies = True
    elif not isinstance(cookies, bool):
        raise UserError(f"{what}: 'cookies' is true, false, or a table of the cookies to start with")
    login = _login(entry["login"], what, base, prefixes) if "login" in entry else None
    return Site(prefixes, headers, frozenset(secret), cookies or login is not None, start, login)


def _login(value: object, what: str, base: Path, prefixes: list[str]) -> LoginForm:
    from raycrawl.credentials import remember
    from raycrawl.scope_rules import url_surt
    from raycrawl.urls import canonicalize

    usage = (f"{what}: login = {{ url = URL, fields = {{ NAME = VALUE }}, secret_field = NAME, "
             "secret = { file = PATH } or { env = NAME }, check = TEXT, tries = N }")
    if not isinstance(value, dict) or set(value) - {"url", "fields", "secret_field", "secret", "check", "tries"} \
            or not {"url", "secret_field", "secret"} <= set(value):
        raise UserError(usage)
    url = canonicalize(value["url"]) if isinstance(value["url"], str) else None
    if url is None or not url.startswith(("http://", "https://")):
        raise UserError(f"{what}: login url must be an http(s) URL")
    if not any(url_surt(url).startswith(p) for p in prefixes):
        raise UserError(f"{what}: login url {url} is not of the site it logs in to (its credentials go there only)")
    fields = value.get("fields", {})
    if not isinstance(fields, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise UserError(f"{what}: login fields are a table of names and strings")
    if not isinstance(value["secret_field"], str) or not value["secret_field"] or value["secret_field"] in fields:
        raise UserError(f"{what}: login secret_field names the field that holds the secret (not one of 'fields')")
    check, tries = value.get("check"), value.get("tries", 3)
    if check is not None and (not isinstance(check, str) or not check):
        raise UserError(f"{what}: login check is a text the page after a login contains")
    if not isinstance(tries, int) or isinstance(tries, bool) or tries < 1:
        raise UserError(f"{what}: login tries is a whole number, at least 1")
    if not isinstance(value["secret"], dict):
        raise UserError(usage)
    secret = _secret(value["secret"], f"{what}, login secret", base)
    form = LoginForm(url, dict(fields), value["secret_field"], secret, check, tries)
    remember(form.body().decode("ascii").rsplit("=", 1)[-1])  # (as it goes on the wire, URL-encoded)
    return form


def _secret(value: dict, what: str, base: Path) -> str:
    """A secret's value: ``{ file = PATH }`` (its first line; a relative PATH beside the session
    file) or ``{ env = NAME }``."""
    from raycrawl.credentials import env_secret, read_secret

    if set(value) == {"file"}:
        return read_secret(base / str(value["file"]), f"{what}:")
    if set(value) == {"env"}:
        text = env_secret(str(value["env"])) or ""
        if not text:
            raise UserError(f"{what}: ${value['env']} is not set")
        return text
    raise UserError(f"{what}: a secret is {{ file = PATH }} or {{ env = NAME }}")
