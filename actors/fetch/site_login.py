"""Form logins (core/site_sessions.py ``login``): which sites one fetch actor is signed in to.

A site's login is due before its first page and again when a page of it comes back as a redirect
to its login URL (its session expired). The login is a request of its own to the host, scheduled
as any request is: the page waits for the host's next turn. A login that fails (an error status,
or its answer lacks the site's ``check`` text), or a session that expires before it served one
page, counts against the site's ``tries``; once they are spent, its pages are recorded as
``login-failed`` and the crawl says so in one line. Only pages of the login URL's own host sign
in: the login is that host's request, in its turn (a subdomain's page could not wait for it).
"""

from __future__ import annotations

import logging

from raycrawl.exchange import FetchResult
from raycrawl.servers import server_of
from raycrawl.site_sessions import LoginForm, SiteSessions

log = logging.getLogger(__name__)


class SiteLogins:
    def __init__(self, sessions: SiteSessions) -> None:
        self.sessions = sessions
        self.signed: set[int] = set()  # sites signed in, by their index in the session file
        self.failed: dict[int, int] = {}  # failed logins in a row
        self.served: dict[int, int] = {}  # pages served since the last login

    def _form(self, url: str) -> tuple[int, LoginForm] | None:
        found = self.sessions.login_for(url)
        if found is None or server_of(found[1].url) != server_of(url):
            return None
        return found

    def before(self, url: str) -> LoginForm | bool:
        """Before fetching ``url``: the form to post first (its site is not signed in and may still
        try), True when its site spent its tries (its pages are not fetched), else False."""
        found = self._form(url)
        if found is None or found[0] in self.signed:
            return False
        site, form = found
        return True if self.failed.get(site, 0) >= form.tries else form

    def judge(self, url: str, fr: FetchResult) -> bool:
        """Record the login ``fr`` (posted for ``url``'s site): whether it worked."""
        site, form = self._form(url)
        worked = fr.error is None and 200 <= fr.status < 400 and (form.check is None or form.check.encode() in fr.body)
        if worked:
            self.signed.add(site)
            self.served[site] = 0
        else:
            self.failed[site] = self.failed.get(site, 0) + 1
            log.warning("login to %s failed (%s)%s", form.url, fr.error or f"HTTP {fr.status}",
                        "; its site's pages are recorded as login-failed" if self.failed[site] >= form.tries else "")
        return worked

    def walled(self, url: str, fr: FetchResult) -> bool:
        """Whether the page ``fr`` of ``url`` is its site's login wall (a redirect to the login URL):
        the session expired. Else the page counts as served."""
        found = self._form(url)
        if found is None:
            return False
        site, form = found
        if fr.redirect is not None and fr.redirect.split("?", 1)[0] == form.url.split("?", 1)[0]:
            self.signed.discard(site)
            if not self.served.get(site):  # (a session that served nothing is a failed login)
                self.failed[site] = self.failed.get(site, 0) + 1
            return True
        if fr.error is None and site in self.signed:
            self.served[site] = self.served.get(site, 0) + 1
            self.failed[site] = 0
        return False
