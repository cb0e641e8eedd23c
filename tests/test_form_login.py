"""Form logins (core/site_sessions.py ``login``, actors/fetch/site_login.py) against websim's members
area (websim/members.py): a site whose pages need a session cookie that a POST to /login gives and
that dies after 10 pages."""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from leaks import files_holding

from raycrawl.errors import UserError
from raycrawl.site_sessions import LoginForm, SiteSessions

ROOT = Path(__file__).resolve().parents[1]


def _session_file(tmp_path: Path, login: str) -> Path:
    (tmp_path / "members-password").write_text("s3cret-pa55\n")
    path = tmp_path / "sessions.toml"
    path.write_text(f'[[site]]\nmatch = "http://members.test/"\nlogin = {login}\n')
    return path


def test_a_login_is_read_with_its_secret_and_only_for_its_site(tmp_path) -> None:
    login = ('{ url = "http://members.test/login", fields = { user = "alice" }, secret_field = "password", '
             'secret = { file = "members-password" }, check = "Signed in" }')
    sessions = SiteSessions.read(_session_file(tmp_path, login))
    site, form = sessions.login_for("http://members.test/a/b.html")
    assert site == 0 and form.tries == 3 and form.check == "Signed in"
    assert form.body() == b"user=alice&password=s3cret-pa55" and form.body(shown=True) == b"user=alice&password=%2A%2A%2A"
    assert sessions.login_for("http://other.test/") is None
    assert sessions.cookies_for("http://members.test/")[0]  # a login keeps its site's cookies
    for bad in ('{ url = "http://elsewhere.test/login", secret_field = "p", secret = { file = "members-password" } }',
                '{ url = "http://members.test/login", secret_field = "p", secret = "in-the-file" }',
                '{ url = "http://members.test/login", secret_field = "p", secret = { file = "members-password" }, tries = 0 }',
                '{ url = "http://members.test/login", fields = { p = "x" }, secret_field = "p", '
                'secret = { file = "members-password" } }'):
        with pytest.raises(UserError):
            SiteSessions.read(_session_file(tmp_path, bad))


def _ask(web, host: str, method: str, path: str, body: bytes = b"", cookie: str = "",
         auth: str = "") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(web.manifest.hosts[host]["ip"], web.port, timeout=10)
    headers = {"Host": f"{host}:{web.port}", **({"Cookie": cookie} if cookie else {}),
               **({"Authorization": auth} if auth else {}),
               **({"Content-Type": "application/x-www-form-urlencoded"} if body else {})}
    conn.request(method, path, body=body or None, headers=headers)
    resp = conn.getresponse()
    resp.read()
    return resp


def test_websims_members_area_needs_a_login_whose_session_expires(tmp_path) -> None:
    from raycrawl.websim import Websim

    with Websim(hosts=4, ips=2, seed=7, clean=True, pages_per_host_mean=5, members_hosts=1,
                out_dir=tmp_path / "web") as web:
        members = web.info["members"]
        (host,) = members["hosts"]
        assert _ask(web, host, "GET", "/").status == 302
        assert _ask(web, host, "GET", "/robots.txt").status == 200
        assert _ask(web, host, "POST", "/login", b"user=member&password=wrong").status == 403
        ok = _ask(web, host, "POST", "/login", f"user=member&password={members['password']}".encode())
        cookie = ok.getheader("Set-Cookie").split(";", 1)[0]
        assert ok.status == 200 and cookie.startswith("websim_session=")
        assert [_ask(web, host, "GET", "/", cookie=cookie).status for _ in range(members["session_requests"] + 1)] \
            == [200] * members["session_requests"] + [302]
        (basic,) = members["basic_auth_hosts"]
        token = base64.b64encode(f"member:{members['password']}".encode()).decode()
        assert _ask(web, basic, "GET", "/").status == 401 and _ask(web, basic, "GET", "/robots.txt").status == 200
        assert _ask(web, basic, "GET", "/", auth=f"Basic {token}").status == 200
        other = next(h for h in web.manifest.hosts if h not in (host, basic))
        _ask(web, other, "GET", "/", cookie=cookie)  # a credential sent elsewhere: websim's leaks.log says so
        assert (tmp_path / "web" / "leaks.log").read_text().startswith(other)


@pytest.mark.slow
def test_a_crawl_signs_in_again_when_its_session_expires(tmp_path) -> None:
    """Every page of the members host crawled (its session serves 10 pages, so the crawl signs in
    again), and of the host behind basic authentication; the logins archived with the password as ***, the password in no file of OUT and sent
    to no other host (websim's leaks.log); 0 politeness violations in websim's log."""
    from warcio.archiveiterator import ArchiveIterator

    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.websim import Websim
    from raycrawl.websim.audit import audit

    with Websim(hosts=5, ips=2, seed=7, clean=True, pages_per_host_mean=25, members_hosts=1,
                out_dir=tmp_path / "web") as web:
        members = web.info["members"]
        (host,), (basic,) = members["hosts"], members["basic_auth_hosts"]
        (tmp_path / "pw").write_text(members["password"] + "\n")
        session = tmp_path / "sessions.toml"
        session.write_text(f'[[site]]\nmatch = "http://{host}/"\nlogin = {{ url = "http://{host}:{web.port}/login", '
                           f'fields = {{ user = "{members["user"]}" }}, secret_field = "password", '
                           f'secret = {{ file = "pw" }}, check = "Signed in" }}\n'
                           f'[[site]]\nmatch = "http://{basic}/"\n'
                           f'basic_auth = {{ user = "{members["user"]}", password = {{ file = "pw" }} }}\n')
        out = tmp_path / "out"
        proc = subprocess.Popen(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
             "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
             "--host-delay", "0.05", "--ip-delay", "0", "--session-file", str(session)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        looked = 0
        while proc.poll() is None:  # no process of the crawl (driver, Ray's workers) shows the password
            ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            assert members["password"] not in ps
            looked += 1
            time.sleep(0.5)
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "Traceback" not in stderr and looked > 3, stderr[-3000:]
        web.flush_log()
        requests = web.requests()
        report = audit(requests, web.manifest, 0.05, 0.0)
        pages, basic_pages = web.manifest.hosts[host]["pages"], web.manifest.hosts[basic]["pages"]
    # The members host's login (not a page of the web, posted again per session) and the pages its
    # wall answered (302 to /login), fetched again once signed in: nothing else is fetched twice.
    walled_fetches = [r for r in requests if r.host.startswith(host + ":") and r.status == 302]
    walled = {r.target for r in walled_fetches}
    assert walled, "no session expired: the test proved nothing"
    expected = {(kind, f"http://{host}:{web.port}{target}") for target in walled for kind in ("duplicate",)} | {
        ("unlinked", f"http://{host}:{web.port}/login"), ("duplicate", f"http://{host}:{web.port}/login")}
    others = [v for v in report.violations if (v.kind, v.key) not in expected]
    assert not others, others[:5]
    got = {r.url for r in iter_link_records(out) if r.url.split("/")[2].split(":")[0] == host and r.status == 200}
    assert len(got) >= pages > members["session_requests"], (len(got), pages)
    behind_basic = {r.url for r in iter_link_records(out) if r.url.split("/")[2].split(":")[0] == basic and r.status == 200}
    assert len(behind_basic) >= basic_pages and not any(r.status == 401 for r in requests if r.host.startswith(basic + ":"))
    logins = []
    for warc in sorted((out / "warc").glob("*.warc.gz")):
        with warc.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "request" and rec.rec_headers.get_header("WARC-Target-URI").endswith("/login") \
                        and rec.http_headers.protocol == "POST":
                    logins.append((rec.content_stream().read(), rec.rec_headers.get_header("Raycrawl-Redacted")))
    assert len(logins) >= 2, len(logins)  # signed in again after the session expired
    report = json.loads((out / "report.json").read_text())
    assert report["session_exchanges"] == len(logins) + len(walled_fetches), (report["session_exchanges"], len(logins))
    assert all(body == b"user=member&password=%2A%2A%2A" and "form field password" in why for body, why in logins), logins
    assert not (tmp_path / "web" / "leaks.log").exists()
    assert not files_holding(out, members["password"].encode())


def test_failed_logins_spend_the_sites_tries_then_its_pages_are_given_up(tmp_path) -> None:
    from raycrawl.actors.fetch.site_login import SiteLogins
    from raycrawl.exchange import FetchResult

    login = ('{ url = "http://members.test/login", secret_field = "password", secret = { file = "members-password" }, '
             'check = "Signed in", tries = 2 }')
    logins = SiteLogins(SiteSessions.read(_session_file(tmp_path, login)))
    page = "http://members.test/a.html"
    assert logins.before("http://www.members.test/a.html") is False  # another host of the site than the login's
    assert isinstance(logins.before(page), LoginForm)
    assert not logins.judge(page, FetchResult(url="http://members.test/login", ip="", status=200, body=b"Try again"))
    assert logins.judge(page, FetchResult(url="http://members.test/login", ip="", status=200, body=b"Signed in"))
    assert logins.before(page) is False  # signed in: fetch
    wall = FetchResult(url=page, ip="", status=302, redirect="http://members.test/login")
    assert logins.walled(page, wall)  # expired before serving a page: a failed login, the second
    assert logins.before(page) is True  # tries spent: its pages are given up
    assert not logins.walled("http://other.test/", wall)
