"""A members area: hosts whose pages need a form login, as many sites have them, and hosts behind
HTTP basic authentication (RFC 7617: user ``member``, the same password; 401 without it).

``GET /login`` is the form; ``POST /login`` with ``user=member&password=…`` (the password websim
chose at start, in websim.json) answers "Signed in" with a session cookie; any other page of the
host without a live session is a 302 to ``/login``. A session dies after SESSION_REQUESTS pages
(a cookie that expires mid-crawl: the crawler must sign in again). robots.txt needs no session.

Ground truth for the tests: every request that carried the session cookie, the password or an
``Authorization`` header to a host that is not the one they belong to is written to ``leaks.log``
(credentials must go to their site only).
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from urllib.parse import parse_qs

from raycrawl.websim.render import Response

LOGIN = "/login"
USER = "member"
COOKIE = "websim_session"
SESSION_REQUESTS = 10
FORM = (b"<!doctype html><html><head><title>Sign in</title></head><body><form method=post action=/login>"
        b"<input name=user><input name=password type=password><button>Sign in</button></form></body></html>")
SIGNED_IN = b"<!doctype html><html><head><title>Signed in</title></head><body>Signed in. <a href=/>Home</a></body></html>"


class MembersArea:
    def __init__(self, hosts: list[str], leaks: Path, basic: list[str] = ()) -> None:
        self.hosts = frozenset(hosts)
        self.basic = frozenset(basic)
        self.password = secrets.token_urlsafe(12)
        self.sessions: dict[str, int] = {}  # token -> pages it may still serve
        self.leaks = leaks
        self.logins = 0

    def info(self) -> dict:
        return {"hosts": sorted(self.hosts), "basic_auth_hosts": sorted(self.basic), "user": USER,
                "password": self.password, "login": LOGIN, "session_requests": SESSION_REQUESTS}

    def gate(self, host: str, method: str, target: str, cookies: dict[str, str], body: bytes,
             authorization: str = "") -> Response | None:
        """The response of a request the members area answers itself, or None: the page is served."""
        if host in self.basic:
            wanted = "Basic " + base64.b64encode(f"{USER}:{self.password}".encode()).decode("ascii")
            if authorization == wanted or target.split("?", 1)[0] == "/robots.txt":
                return None
            return Response(401, "text/html", b"<html><body>Authorization required</body></html>",
                            headers=(("WWW-Authenticate", 'Basic realm="websim"'),))
        if host not in self.hosts:
            self._watch(host, target, cookies, body, authorization)
            return None
        path = target.split("?", 1)[0]
        if path == "/robots.txt":
            return None
        if path == LOGIN:
            if method != "POST":
                return Response(200, "text/html", FORM)
            form = parse_qs(body.decode("utf-8", "replace"))
            if form.get("user") == [USER] and form.get("password") == [self.password]:
                token = secrets.token_urlsafe(16)
                self.sessions[token] = SESSION_REQUESTS
                self.logins += 1
                return Response(200, "text/html", SIGNED_IN,
                                headers=(("Set-Cookie", f"{COOKIE}={token}; Path=/; HttpOnly"),))
            return Response(403, "text/html", b"<html><body>Wrong user or password</body></html>")
        token = cookies.get(COOKIE, "")
        left = self.sessions.get(token, 0)
        if left <= 0:
            self.sessions.pop(token, None)
            return Response(302, "text/html", b"", headers=(("Location", LOGIN),))
        self.sessions[token] = left - 1
        return None

    def _watch(self, host: str, target: str, cookies: dict[str, str], body: bytes, authorization: str) -> None:
        tokens = set(self.sessions) | {t for t in [cookies.get(COOKIE)] if t}
        if authorization or COOKIE in cookies or any(t.encode() in body for t in tokens) or self.password.encode() in body \
                or self.password in target:
            with self.leaks.open("a", encoding="utf-8") as fh:
                fh.write(f"{host}\t{target}\n")
