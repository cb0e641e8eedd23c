"""Headers per site (core/site_sessions.py): the session file and its refusals, and the real fetcher
talking HTTP over loopback to a server that records what it was sent: a site's headers go to it
(and its subdomains, within a path when one is given) and to no other host dialed at the same
address; a secret header is sent as it is and archived as ``***``, the WARC request record naming
it (read back with warcio), and its value is in no byte of the WARC file."""

from __future__ import annotations

import asyncio
import contextlib
import gzip

import pytest
from aiohttp import web

from raycrawl.errors import UserError
from raycrawl.site_sessions import SiteSessions

SESSION = """
[[site]]
match = "http://api.test/"
headers = { "Accept-Language" = "fr", "Authorization" = { file = "TOKEN" } }

[[site]]
match = ["OTHER"]
headers = { "X-Api-Key" = { env = "SITE_SESSIONS_KEY" } }
"""


def _sessions(tmp_path, monkeypatch, other: str = "test,other,)/private/") -> SiteSessions:
    token = tmp_path / "token"
    token.write_text("Bearer t0ken-v4lue\n")
    token.chmod(0o600)
    monkeypatch.setenv("SITE_SESSIONS_KEY", "k3y-v4lue")
    path = tmp_path / "sessions.toml"
    path.write_text(SESSION.replace("TOKEN", str(token)).replace("OTHER", other))
    return SiteSessions.read(path)


@contextlib.asynccontextmanager
async def _serving(handler, port: int = 0):  # noqa: ANN001, ANN202 - an aiohttp handler; yields the port
    """A real HTTP server on loopback answering every GET with ``handler``."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()


def _fetcher(sessions: SiteSessions):  # noqa: ANN202 - the real fetcher, loopback allowed
    from raycrawl.actors.fetch.fetcher import Fetcher
    from raycrawl.policies.networks import NetworkPolicy

    return Fetcher("raycrawl-test", 2, 2, 1 << 20, 1 << 20, NetworkPolicy("127.0.0.0/8"), sessions=sessions)


def test_a_site_gets_its_headers_and_no_other_site_does(tmp_path, monkeypatch) -> None:
    s = _sessions(tmp_path, monkeypatch)
    headers, secret = s.headers_for("http://api.test/v1?q=1")
    assert headers == {"Accept-Language": "fr", "Authorization": "Bearer t0ken-v4lue"} and secret == {"Authorization"}
    assert s.headers_for("https://eu.api.test/")[0]["Accept-Language"] == "fr"  # (a subdomain is the site's)
    for url in ("http://apitest.test/", "http://api.test.evil.test/", "http://cdn.test/lib.js", "http://other.test/"):
        assert s.headers_for(url) == ({}, frozenset()), url
    assert s.headers_for("http://other.test/private/a")[0] == {"X-Api-Key": "k3y-v4lue"}


@pytest.mark.parametrize(("text", "why"), [
    ("[[site]]\nmatch = 'http://a.test/'\nheaders = { 'Host' = 'x' }", "not a header"),
    ("[[site]]\nmatch = 'http://a.test/'\nheaders = { 'Bad Name' = 'x' }", "not a header"),
    ("[[site]]\nheaders = { 'A' = 'x' }", "'match'"),
    ("[[site]]\nmatch = 'http://a.test/'\nheaders = { 'A' = { env = 'SITE_SESSIONS_UNSET' } }", "is not set"),
    ("[[site]]\nmatch = 'http://a.test/'\nheaders = { 'A' = { file = '/nonexistent/token' } }", "cannot read"),
    ("[[site]]\nmatch = 'http://a.test/'\nheaders = { 'A' = 3 }", "a value is"),
    ("[site]\nmatch = 1", "[[site]]"),
    ("this is not toml = = ", "not TOML"),
])
def test_bad_session_files_are_one_line_refusals(tmp_path, monkeypatch, text, why) -> None:
    monkeypatch.delenv("SITE_SESSIONS_UNSET", raising=False)
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=why.replace("[", r"\[").replace("]", r"\]")):
        SiteSessions.read(path)


def test_the_fetcher_sends_a_site_its_headers_and_archives_no_secret(tmp_path, monkeypatch) -> None:
    from warcio.archiveiterator import ArchiveIterator

    from raycrawl.storage.warc import REDACTED_HEADERS, WarcStore

    seen: list[tuple[str, dict[str, str]]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.host.split(":")[0], dict(request.headers)))
        return web.Response(text="<html><body>hello</body></html>", content_type="text/html")

    async def run() -> list:
        async with _serving(handler) as port:
            # (a site's path prefix as a URL: the SURT form without a port is the site on port 80 only)
            f = _fetcher(_sessions(tmp_path, monkeypatch, f"http://other.test:{port}/private/"))
            try:
                return [await f.fetch(f"http://{host}:{port}{path}", "127.0.0.1")
                        for host, path in (("api.test", "/v1"), ("cdn.test", "/lib.js"), ("other.test", "/private/x"),
                                           ("other.test", "/public/y"))]
            finally:
                await f.close()

    results = asyncio.run(run())
    assert [r.status for r in results] == [200, 200, 200, 200]
    assert "X-Api-Key" not in seen[3][1]  # (other.test outside /private/)
    sent = dict(seen[:3])
    assert sent["api.test"]["Authorization"] == "Bearer t0ken-v4lue" and sent["api.test"]["Accept-Language"] == "fr"
    assert "Authorization" not in sent["cdn.test"] and "Accept-Language" not in sent["cdn.test"]
    assert "X-Api-Key" not in sent["cdn.test"] and sent["other.test"]["X-Api-Key"] == "k3y-v4lue"

    store = WarcStore(tmp_path / "warc", "agent0")
    for fr in results[:3]:
        store.write(fr)
    store.close()
    (path,) = (tmp_path / "warc").glob("*.warc.gz")
    with gzip.open(path) as fh:
        raw = fh.read()
    assert b"t0ken-v4lue" not in raw and b"k3y-v4lue" not in raw
    requests = {}
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "request":
                requests[rec.rec_headers.get_header("WARC-Target-URI").split("/")[2].split(":")[0]] = rec
    api = requests["api.test"]
    assert api.rec_headers.get_header(REDACTED_HEADERS) == "Authorization"
    assert api.http_headers.get_header("Authorization") == "***" and api.http_headers.get_header("Accept-Language") == "fr"
    assert requests["cdn.test"].rec_headers.get_header(REDACTED_HEADERS) is None
    assert requests["other.test"].http_headers.get_header("X-Api-Key") == "***"


def test_basic_auth_goes_to_its_site_only_and_is_archived_as_stars(tmp_path, monkeypatch) -> None:
    import base64

    from raycrawl.storage.warc import WarcStore

    monkeypatch.setenv("SITE_SESSIONS_PASSWORD", "m3mber-pa55")
    expected = "Basic " + base64.b64encode(b"archive:m3mber-pa55").decode()

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="members"'})
        return web.Response(text="members only", content_type="text/html")

    async def run() -> list:
        async with _serving(handler) as port:
            path = tmp_path / "s.toml"
            path.write_text(f'[[site]]\nmatch = "http://members.test:{port}/"\n'
                            'basic_auth = { user = "archive", password = { env = "SITE_SESSIONS_PASSWORD" } }\n')
            f = _fetcher(SiteSessions.read(path))
            try:
                return [await f.fetch(f"http://{host}:{port}/area", "127.0.0.1") for host in ("members.test", "cdn.test")]
            finally:
                await f.close()

    members, other = asyncio.run(run())
    assert members.status == 200 and members.body == b"members only"
    assert other.status == 401  # another host at the same address: no credentials sent
    store = WarcStore(tmp_path / "warc", "agent0")
    store.write(members)
    store.close()
    (path,) = (tmp_path / "warc").glob("*.warc.gz")
    with gzip.open(path) as fh:
        raw = fh.read()
    assert b"Authorization: ***" in raw and expected.split()[1].encode() not in raw and b"m3mber-pa55" not in raw


def test_cookies_kept_per_site_as_a_browser_keeps_them_and_shared_by_every_fetcher(tmp_path, redis_url) -> None:
    """A site whose session keeps cookies: its login sets a session cookie (Path=/), the members'
    page gets it back, a cookie for another path is not sent, an expired one is dropped; another host
    at the same address gets none. A second fetcher (another fetch actor, or the run after a
    ``--resume``) sharing the crawl's Redis sends the first one's cookies without being set them, a
    ``Max-Age`` cookie no longer once it expired (replayed later, it does not live longer), and a
    cookie it is set goes back from the first fetcher (actors/fetch/shared_cookies.py)."""
    import redis

    from raycrawl.actors.fetch.shared_cookies import SharedCookies

    got: list[tuple[str, str, str | None]] = []
    sets = {"/login": ["session=s3ss; Path=/; HttpOnly", "narrow=n; Path=/admin/", "gone=g; Path=/; Max-Age=0",
                       "short=s; Path=/; Max-Age=3"],
            "/renew": ["session=n3w; Path=/"]}

    async def handler(request: web.Request) -> web.Response:
        got.append((request.host.split(":")[0], request.path, request.headers.get("Cookie")))
        resp = web.Response(text="ok", content_type="text/html")
        for header in sets.get(request.path, []):
            resp.headers.add("Set-Cookie", header)
        return resp

    client = redis.Redis.from_url(redis_url)

    async def run() -> None:
        async with _serving(handler) as port:
            path = tmp_path / "s.toml"
            path.write_text(f'[[site]]\nmatch = "http://members.test:{port}/"\ncookies = {{ consent = "yes" }}\n')
            fetchers = []
            for _ in range(2):
                f = _fetcher(SiteSessions.read(path))
                f.cookie_sync = SharedCookies(client, "rc:", f.cookies,
                                              lambda fn, *a: asyncio.get_running_loop().run_in_executor(None, fn, *a))
                fetchers.append(f)
            a, b = fetchers

            async def get(f, host: str, p: str) -> None:
                assert (await f.fetch(f"http://{host}:{port}{p}", "127.0.0.1")).status == 200

            try:
                for host, p in (("members.test", "/login"), ("members.test", "/area"), ("other.test", "/login"),
                                ("other.test", "/area")):
                    await get(a, host, p)
                await asyncio.sleep(1.5)
                await get(b, "members.test", "/area")  # never set a cookie itself
                await asyncio.sleep(2.0)  # short's 3 s are over, not 3 s after b first read it
                await get(b, "members.test", "/admin/x")
                await get(b, "members.test", "/renew")
                await get(a, "members.test", "/area")
            finally:
                for f in fetchers:
                    await f.close()

    try:
        asyncio.run(run())
    finally:
        client.close()
    sent = [(h, p, c) for h, p, c in got]
    assert sent == [("members.test", "/login", "consent=yes"),
                    ("members.test", "/area", "consent=yes; session=s3ss; short=s"),  # not narrow, not gone
                    ("other.test", "/login", None), ("other.test", "/area", None),
                    ("members.test", "/area", "consent=yes; session=s3ss; short=s"),  # the other fetcher's
                    ("members.test", "/admin/x", "consent=yes; session=s3ss; narrow=n"),  # short expired
                    ("members.test", "/renew", "consent=yes; session=s3ss"),
                    ("members.test", "/area", "consent=yes; session=n3w")], sent


def test_a_secrets_relative_path_is_beside_the_session_file(tmp_path, monkeypatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "token").write_text("t0k\n")
    (tmp_path / "conf" / "token").chmod(0o600)
    (tmp_path / "conf" / "s.toml").write_text('[[site]]\nmatch = "http://a.test/"\nheaders = { "X-T" = { file = "token" } }\n')
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # (a fetch actor's working directory is not the CLI's)
    assert SiteSessions.read(tmp_path / "conf" / "s.toml").headers_for("http://a.test/")[0] == {"X-T": "t0k"}


def test_a_fetcher_whose_redis_does_not_answer_keeps_its_own_cookies(tmp_path) -> None:
    """The shared jar's Redis out of reach: the fetcher still fetches (it never raises), sends
    what it was set itself, and says so in the log."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from raycrawl.actors.fetch.shared_cookies import SharedCookies
    from raycrawl.redis_server import free_port

    got: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        got.append(request.headers.get("Cookie"))
        resp = web.Response(text="ok", content_type="text/html")
        resp.headers.add("Set-Cookie", "session=own; Path=/")
        return resp

    async def run() -> list[int]:
        async with _serving(handler) as port:
            path = tmp_path / "s.toml"
            path.write_text(f'[[site]]\nmatch = "http://members.test:{port}/"\ncookies = true\n')
            f = _fetcher(SiteSessions.read(path))
            gone = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
            f.cookie_sync = SharedCookies(gone, "rc:", f.cookies,
                                          lambda fn, *a: asyncio.get_running_loop().run_in_executor(None, fn, *a))
            try:
                return [(await f.fetch(f"http://members.test:{port}/{i}", "127.0.0.1")).status for i in range(2)]
            finally:
                await f.close()

    assert asyncio.run(run()) == [200, 200]
    assert got == [None, "session=own"]
