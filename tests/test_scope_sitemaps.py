"""Scope rules (regular expressions, SURT prefixes) and sitemaps as a source of URLs (issue 19):
the rules as Heritrix and Scrapy users write them, sitemaps as sitemaps.org defines them, and a
websim crawl seeded with sitemaps only, checked against websim's request log and manifest."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from raycrawl.actors.visit.parser import Parser
from raycrawl.actors.visit.stages.focus import Focus
from raycrawl.actors.visit.stages.sitemaps import Sitemaps
from raycrawl.actors.visit.visit_batch import decide
from raycrawl.actors.visit.visit_stage import Findings, Outcome, Stages
from raycrawl.errors import UserError
from raycrawl.exchange import FetchResult
from raycrawl.policies.filters import Scope, build_prefetch
from raycrawl.scope_rules import surt_prefix
from raycrawl.sitemaps import is_sitemap, sitemap_locs

ROOT = Path(__file__).resolve().parents[1]


# --- scope ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "inside", "outside"), [
    # a host and its subdomains, never a name that only starts the same
    ("org,example,", ["http://example.org/", "http://www.example.org/a", "http://a.b.example.org:8080/x",
                      "http://example.org:8080/"],
     ["http://examples.org/", "http://example.com/", "http://org.example.net/"]),
    # the CDX form of a path (pywb, cdxj-indexer), case-sensitive and slash included, as Heritrix compares
    ("org,example)/docs/", ["http://example.org/docs/", "http://example.org/docs/a?b=1"],
     ["http://example.org/docs", "http://example.org/Docs/", "http://www.example.org/docs/"]),
    # Heritrix's form with a scheme; the scheme is not compared
    ("http://(org,example,www,)/a", ["http://www.example.org/a", "https://www.example.org/ab"],
     ["http://example.org/a", "http://www.example.org/b"]),
    # a URL: its host and subdomains when it has no path, else that path
    ("http://Example.ORG/", ["http://example.org/x", "http://sub.example.org/"], ["http://example.com/"]),
    ("https://example.org/docs/", ["http://example.org/docs/x"], ["http://example.org/docs2/", "http://example.org/"]),
    # a port: after the host's comma (Heritrix), that port only
    ("http://a.test:808/", ["http://a.test:808/x"], ["http://a.test/x", "http://a.test:8080/", "http://b.a.test:808/"]),
    ("test,a:808)/x", ["http://a.test:808/x/y"], ["http://a.test/x", "http://a.test:8080/x"]),
])
def test_surt_prefix_rules(rule: str, inside: list[str], outside: list[str]) -> None:
    scope = Scope(allow_surts=[rule])
    assert [u for u in inside if scope.explain(u) is not None] == []
    assert [u for u in outside if scope.explain(u) != "scope-allow"] == []


def test_regexes_surts_and_deny_wins() -> None:
    f = build_prefetch({"scope_allow": [r"\.example\.net/"], "scope_allow_surts": ["org,example,"],
                        "scope_deny": [r"/private/", r"\?sessionid="], "scope_deny_surts": ["org,example,ads,"]})
    assert f.explain("http://example.org/a") is None
    assert f.explain("http://www.example.net/a") is None  # either kind of allow rule admits
    assert f.explain("http://example.com/a") == "scope-allow"
    assert f.explain("http://example.org/private/x") == "scope-deny"  # deny wins over allow
    assert f.explain("http://www.example.net/a?sessionid=1") == "scope-deny"
    assert f.explain("http://ads.example.org/") == "scope-deny"
    assert build_prefetch({}).explain("http://anything.test/") is None  # no rules: everything in scope


def test_bad_rules_are_user_errors() -> None:
    from raycrawl.settings import Settings, parse_assignment

    with pytest.raises(UserError, match="scope_deny"):
        Settings(scope_deny=["(unclosed"]).validate()
    for bad in ("org example", "http://", ""):
        with pytest.raises(UserError, match="SURT"):
            surt_prefix(bad)
    # -s takes a JSON array for items that contain commas (SURTs, regexes)
    assert parse_assignment('scope_allow_surts=["org,example,", "test,a,"]') == ("scope_allow_surts",
                                                                               ["org,example,", "test,a,"])
    assert parse_assignment(r"scope_deny=[\"a{1,3}\"]".replace("\\", "")) == ("scope_deny", ["a{1,3}"])
    with pytest.raises(UserError):
        parse_assignment("scope_deny=[1, 2]")


# --- sitemaps -------------------------------------------------------------------------------------

# The examples of https://www.sitemaps.org/protocol.html (entity escaping; the index form).
URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
   <url>
      <loc>http://www.example.com/</loc>
      <lastmod>2005-01-01</lastmod>
   </url>
   <url>
      <loc>http://www.example.com/catalog?item=12&amp;desc=vacation_hawaii</loc>
      <changefreq>weekly</changefreq>
   </url>
   <url><loc>http://www.example.com/ums&#xE9;e.html</loc></url>
</urlset>"""
INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
   <sitemap><loc>http://www.example.com/sitemap1.xml.gz</loc><lastmod>2004-10-01T18:23:17+00:00</lastmod></sitemap>
   <sitemap><loc>http://www.example.com/sitemap2.xml.gz</loc></sitemap>
</sitemapindex>"""


def test_sitemaps_org_examples() -> None:
    assert sitemap_locs(URLSET) == ["http://www.example.com/", "http://www.example.com/catalog?item=12&desc=vacation_hawaii",
                                    "http://www.example.com/umsée.html"]
    assert sitemap_locs(INDEX) == ["http://www.example.com/sitemap1.xml.gz", "http://www.example.com/sitemap2.xml.gz"]
    assert is_sitemap("application/xml", URLSET) and is_sitemap("text/xml", INDEX)
    assert is_sitemap("application/x-gzip", gzip.compress(URLSET))
    assert sitemap_locs(gzip.compress(URLSET)) == sitemap_locs(URLSET)
    rss = b'<?xml version="1.0"?><rss version="2.0"><channel><link>http://a.test/</link></channel></rss>'
    assert not is_sitemap("application/xml", rss) and not is_sitemap("text/html", URLSET)


def test_hostile_sitemaps() -> None:
    """A billion-laughs entity is never expanded; a truncated file keeps the entries before its end;
    a gzip bomb is read up to the cap only."""
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              + b"".join(b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10 if i > 1 else b"&lol;" * 10)
                         for i in range(1, 10))
              + b']><urlset><url><loc>http://a.test/&lol9;</loc></url><url><loc>http://a.test/ok</loc></url></urlset>')
    assert sitemap_locs(laughs) == ["http://a.test/&lol9;", "http://a.test/ok"]
    assert sitemap_locs(URLSET[:URLSET.index(b"<url><loc>http://www.example.com/ums")]) == sitemap_locs(URLSET)[:2]
    bomb = gzip.compress(b"<urlset>" + b" " * (20 << 20))
    assert is_sitemap("application/gzip", bomb, max_bytes=1 << 20)
    assert sitemap_locs(bomb, max_bytes=1 << 20) == []


def test_parser_reads_a_sitemap_as_links() -> None:
    fr = FetchResult(url="http://www.example.com/sitemap.xml", ip="127.0.0.2", status=200, body=URLSET,
                     ctype="application/xml")
    result = Parser().parse(fr)
    assert result.sitemap and not result.text and result.digest is None
    assert result.links == ["http://www.example.com/", "http://www.example.com/catalog?item=12&desc=vacation_hawaii",
                            "http://www.example.com/ums%C3%A9e.html"]


def test_robots_sitemap_lines_followed_only_when_asked() -> None:
    body = b"User-agent: *\nDisallow: /private/\n\nSitemap: http://a.test/sitemap.xml\nSitemap: /relative-map.xml\n"
    fr = FetchResult(url="http://a.test/robots.txt", ip="127.0.0.2", status=200, body=body, ctype="text/plain")
    outcome = [Outcome("http://a.test/robots.txt", "robots", fr)]
    assert decide(outcome, Findings(), Stages([])).follow == []
    assert decide(outcome, Findings(), Stages([Sitemaps()])).follow == [
        "http://a.test/sitemap.xml", "http://a.test/relative-map.xml"]
    failed = FetchResult(url="http://a.test/robots.txt", ip="127.0.0.2", status=404, body=body)
    assert decide([Outcome("k", "robots", failed)], Findings(), Stages([Sitemaps()])).follow == []


# --- a crawl --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_crawl_seeded_with_sitemaps_inside_scope(tmp_path: Path) -> None:
    """Seeds: the sitemaps of three websim hosts, nothing else. Scope: those hosts (SURT prefixes
    written by hand here), minus pages whose number is even (a regular expression). websim's request
    log: nothing outside the scope was asked for, and every page the sitemaps list that the scope
    and robots.txt (websim's manifest) allow was fetched."""
    from raycrawl.websim import Websim
    from raycrawl.websim.audit import is_robots_path

    with Websim(hosts=16, ips=4, seed=3, pages_per_host_mean=8, out_dir=tmp_path / "web") as web:
        manifest = web.manifest
        hosts = sorted(h for h, rec in manifest.hosts.items()
                       if rec["role"] == "plain" and not rec["rules"]["disallow_all"])[:3]
        assert len(hosts) == 3
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"http://{h}:{web.port}/sitemap.xml\n" for h in hosts))
        surts = [",".join(reversed(h.split("."))) + "," for h in hosts]
        deny = r"-\d*[02468]\.html$"
        out = tmp_path / "crawl"
        proc = subprocess.run(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(seeds), "--out", str(out), "--dns-server",
             "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--host-delay", "0.05",
             "--ip-delay", "0.01", "-s", f"scope_allow_surts={json.dumps(surts)}", "-s", f"scope_deny=[{json.dumps(deny)}]",
             "-s", "read_timeout=3", "-s", "max_retries=0"],
            capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        web.flush_log()
        requested = {(r.host.split(":")[0], r.target) for r in web.requests()}
    outside = sorted((h, t) for h, t in requested
                     if not is_robots_path(t) and (h not in hosts or re.search(deny, t)))
    assert outside == []
    listed = {u for u, p in manifest.pages.items() if urlsplit(u).hostname in hosts and p["kind"] == "html"
              and p["status"] == 200 and p["removed_in"] is None}
    wanted = {u for u in listed if manifest.allowed(u) and not re.search(deny, u)}
    fetched = {f"http://{h}:{web.port}{t}" for h, t in requested}
    assert len(wanted) > 10 and wanted <= fetched, sorted(wanted - fetched)[:5]
    assert {f"http://{h}:{web.port}/sitemap.xml" for h in hosts} <= fetched
    filtered = json.loads((out / "report.json").read_text())["filtered"]
    assert filtered.get("scope-allow", 0) > 0 and filtered.get("scope-deny", 0) > 0, filtered


def test_a_sitemap_in_a_focused_crawl_is_no_page():
    """A focused crawl scores pages, not sitemaps: a sitemap gets no score (it once got an empty
    page's, counted in the live harvest), and its URLs keep the level it was queued with."""
    from raycrawl import text
    from raycrawl.actors.visit.stages.focus import score_pages
    from raycrawl.policies.focus import FocusPolicy, TermQuery

    policy = FocusPolicy("best-first", 4, TermQuery(text.stems(["hawaii"], drop_stopwords=False), 1), "terms:hawaii")
    fr = FetchResult(url="http://www.example.com/sitemap.xml", ip="127.0.0.2", status=200, body=URLSET,
                     ctype="application/xml")
    result = Parser().parse(fr)
    score_pages([result], policy)
    assert result.score is None
    d = decide([Outcome(fr.url, "page", fr, level=2)], Findings({fr.url: result}), Stages([Focus(policy)]))
    assert d.levels == [2, 2, 2] and d.counters["focus:scored"] == 0
