"""Rendering inside a crawl (issue 52): one crawl by two agents with ``--render auto`` of websim's JavaScript web,
whose script-made pages carry their text and links only in scripts (inline, ``fetch()`` from a
JSON endpoint, a lazy image, an infinite list, pushState, a script that throws, alerts), judged
against websim's manifest (the pages' links) and its request log (every request, the browser's
included: the browser has no network, so what it needed was fetched by the crawl, politely)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from raycrawl.storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
DELAY = 0.05
FRAME = "document.querySelector('iframe')?.contentDocument"  # pywb's replay frame's document
# (requisites: every plain host's pages load a library script from one "CDN" host, which one of the
# crawl's two agents owns: the other's renders get it handed over)
WEB = {"hosts": 12, "ips": 3, "seed": 5, "clean": True, "pages_per_host_mean": 5, "scripts": True, "requisites": True}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """(websim's manifest, the crawl's directory, websim's audit of the crawl)."""
    from raycrawl.websim import Websim

    tmp = tmp_path_factory.mktemp("render")
    with Websim(**WEB, out_dir=tmp / "web") as web:
        out = tmp / "crawl"
        r = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                            "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                            "--host-delay", str(DELAY), "--ip-delay", "0.0", "--render", "auto", "--render-wait", "10",
                            "--render-timeout", "8", "--render-screenshot", "--agents", "2",
                            "-s", "render_browsers=1", "-s", "render_tabs=2"],
                           capture_output=True, text=True, cwd=ROOT, timeout=400,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert r.returncode == 0, r.stderr[-3000:]
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        report = web.audit(DELAY, 0.0)
        yield web.manifest, out, report


def _script_kind(page: dict) -> str | None:
    return next((lab[3:] for lab in page["labels"] if lab.startswith("js:")), None)


def test_script_made_links_are_found_and_nothing_else(crawled) -> None:
    manifest, out, report = crawled
    assert not report.violations, report.violations[:5]  # host, IP, robots.txt: the browser's requests included
    fetched = {rec.url: rec for rec in iter_link_records(out)}
    rendered = {rec.url: rec for rec in iter_link_records(out, "rendered")}
    scripted = {u: p for u, p in manifest.pages.items() if _script_kind(p) and u in fetched
                and fetched[u].status == 200}
    kinds = {_script_kind(p) for p in scripted.values()}
    assert kinds >= {"inline", "fetch", "lazy", "infinite", "pushstate", "throws", "alerts", "route"}, kinds
    # An application's routes serve one shell, byte for byte: duplicates of its first route, rendered all
    # the same (their scripts make each route's page from its URL).
    routes = [u for u, p in scripted.items() if _script_kind(p) == "route" and fetched[u].dup_of]
    assert routes and all(u in rendered for u in routes)
    truth = found = wrong = 0
    for url, page in scripted.items():
        if _script_kind(page) in ("hangs", "eats"):
            continue
        assert fetched[url].links == [], url  # the markup sent has none: only a browser finds them
        assert url in rendered, f"{url} ({_script_kind(page)}) was not rendered"
        links = set(rendered[url].links)
        truth += len(page["links"])
        found += len(links & set(page["links"]))
        wrong += len(links - set(page["links"]))
    assert truth > 40
    assert found / truth >= 0.99, (found, truth)  # recall of script-made links
    assert wrong == 0  # precision 1.0
    # Every page a script-made page links to was crawled (links followed from the rendered DOM).
    targets = {u for p in scripted.values() for u in p["links"] if manifest.pages.get(u, {}).get("allowed", True)}
    assert targets - set(fetched) == set()


def test_the_graph_has_the_rendered_links_marked(crawled) -> None:
    from raycrawl.storage.crawl_graph import build_crawl_graph, graph_paths, open_crawl_graph

    manifest, out, _ = crawled
    info = build_crawl_graph(out)
    graph, _, urls = open_crawl_graph(out)
    marked = {(urls.url_of(int(a)), urls.url_of(int(b)))
              for a, b in (line.split("\t") for line in graph_paths(out)["rendered"].read_text().splitlines())}
    fetched = {rec.url for rec in iter_link_records(out) if 200 <= rec.status < 300}
    expected = {(u, t) for u, p in manifest.pages.items() if _script_kind(p) not in (None, "hangs", "eats")
                and u in fetched for t in p["links"] if t in fetched}
    assert expected and marked == expected  # the arcs only scripts made, each marked, no other
    assert info["rendered_arcs"] == len(marked)
    for u, t in expected:
        assert urls.id_of(t) in set(graph.successors(urls.id_of(u)).tolist())


def test_every_render_ran_the_scripts_the_crawl_archived_whichever_agent_fetched_them(crawled) -> None:
    """Each page rendered ran every script its markup names that the crawl archived (websim's
    scripts mark the DOM they run in): the "CDN" library, which every plain host's pages load and
    one agent fetched, reached the other agent's renders too (actors/visit/render_handover.py)."""
    import re
    from urllib.parse import urljoin

    from selectolax.lexbor import LexborHTMLParser

    from raycrawl.storage.warc import DOM_URI

    manifest, out, _ = crawled
    archived = {rec.url for rec in iter_link_records(out) if rec.status == 200}
    records = {rec.url: rec for rec in iter_link_records(out, "rendered")}
    doms, markup = {}, {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for r in ArchiveIterator(f):
                target = r.rec_headers.get_header("WARC-Target-URI")
                if r.rec_type == "resource" and target.startswith(DOM_URI):
                    doms[target[len(DOM_URI):]] = (path.name, r.content_stream().read().decode())
                elif r.rec_type == "response" and target in records:
                    markup.setdefault(target, r.content_stream().read())
    checked, agents, foreign = 0, set(), 0
    for url, (warc, dom) in doms.items():
        if records[url].error or url not in markup:  # (the breakers, whose renders failed; revisits)
            continue
        named = {urljoin(url, n.attributes["src"]) for n in LexborHTMLParser(markup[url]).css("script[src]")}
        scripts = {u for u in named if u in archived and "routes" not in manifest.pages[u]["labels"]}
        loaded = re.search(r'data-loaded="([^"]*)"', dom)
        ran = set(loaded.group(1).split()) if loaded else set()
        assert {u.split("://", 1)[1].replace(f":{manifest.meta['port']}", "") for u in scripts} <= ran, (url, scripts, ran)
        checked += bool(scripts)
        foreign += any(manifest.pages[u]["host"] != manifest.pages[url]["host"] for u in scripts)
        agents.add(warc.split("-", 1)[0])
    # (both agents' renders among them, and scripts of another host: the CDN's library)
    assert checked >= 10 and foreign >= 5 and len(agents) == 2, (checked, foreign, agents)


def test_the_summaries_read_the_rendered_text(crawled) -> None:
    """A rendered page's summary is its rendered DOM's text, which is the text websim's scripts
    write: the page's content as a page without scripts would carry it."""
    from raycrawl.actors.visit.summary_writer import document_counts
    from raycrawl.storage.summary_spill import iter_spill, spill_paths
    from raycrawl.text import page_text
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    manifest, out, _ = crawled
    model = WebModel.generate(**WEB)
    static = Renderer(model, manifest.meta["port"])
    spilled = [r for r in iter_spill(spill_paths(out)) if r.get("rendered")]
    assert spilled
    checked = 0
    for rec in spilled:
        page = manifest.pages[rec["url"]]
        if _script_kind(page) in ("hangs", "eats"):
            continue
        host = model.by_name[page["host"]]
        path = rec["url"].split(str(manifest.meta["port"]), 1)[1]
        length, terms = document_counts(page_text(static.html(host, host.pages[path]).encode(), "utf-8"))
        assert (rec["length"], rec["terms"]) == (length, terms), rec["url"]
        checked += 1
    assert checked >= 10


def test_summaries_from_the_warc_files_read_the_rendered_dom(crawled) -> None:
    """``summaries build`` without ``--from-spill`` reads the WARC files: a rendered page's record is
    its DOM's text there too (the ``urn:dom:`` resource), equal to what the crawl spilled for it,
    and the archive built from them takes it over the page's markup."""
    from raycrawl.storage.summary_spill import iter_spill, spill_paths
    from raycrawl.tasks.summaries_build import _once_per_url, warc_records

    _, out, _ = crawled
    spilled = {r["url"]: (r["length"], r["terms"]) for r in _once_per_url(iter_spill(spill_paths(out)))
               if r.get("rendered")}
    from_warc = _once_per_url(warc_records(out))
    rendered = {r["url"]: (r["length"], r["terms"]) for r in from_warc if r.get("rendered")}
    assert rendered and rendered == spilled, sorted(set(rendered) ^ set(spilled))[:5]
    markup = {r["url"] for r in warc_records(out) if not r.get("rendered")}
    assert set(rendered) & markup  # (the page's markup was read too, and the DOM took its place)


def test_what_scripts_asked_for_was_fetched_by_the_crawl(crawled) -> None:
    manifest, out, _ = crawled
    fetched = {rec.url: rec for rec in iter_link_records(out)}
    # fetch()'s JSON endpoints and lazy images are named by no markup: only the renders asked for them.
    endpoints = [u for u, p in manifest.pages.items() if p["kind"] == "json"]
    lazy = [u for u, p in manifest.pages.items() if "/static/lazy" in u]
    assert endpoints and lazy
    pages_fetched = {u for u, p in manifest.pages.items() if _script_kind(p) in ("fetch", "lazy") and u in fetched}
    wanted = [u for u in endpoints + lazy if manifest.pages[u].get("allowed", True)
              and any(u.startswith(p.rsplit("/", 1)[0]) for p in pages_fetched)]
    assert wanted and all(fetched.get(u) is not None and fetched[u].status == 200 for u in wanted), \
        [u for u in wanted if u not in fetched]


def test_pages_that_break_the_browser_are_recorded_and_the_crawl_goes_on(crawled) -> None:
    manifest, out, _ = crawled
    rendered = {rec.url: rec for rec in iter_link_records(out, "rendered")}
    breakers = {u: _script_kind(p) for u, p in manifest.pages.items() if _script_kind(p) in ("hangs", "eats")}
    seen = [u for u in breakers if u in rendered]
    assert seen, "no page that breaks a browser was crawled"
    for u in seen:
        assert rendered[u].error in ("render-timeout", "render-crashed"), (u, rendered[u].error)


def test_the_rendered_dom_is_archived_beside_the_response(crawled) -> None:
    _, out, _ = crawled
    rendered = {rec.url: rec for rec in iter_link_records(out, "rendered") if rec.error is None}
    doms: dict[str, bytes] = {}
    shots: dict[str, bytes] = {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "resource" and uri.startswith("urn:dom:"):
                    doms[uri[len("urn:dom:"):]] = rec.content_stream().read()
                elif rec.rec_type == "resource" and uri.startswith("urn:screenshot:"):
                    shots[uri[len("urn:screenshot:"):]] = rec.content_stream().read()
    assert rendered and set(rendered) <= set(doms) and set(rendered) <= set(shots)
    for url, rec in rendered.items():
        assert rec.warc is not None
        assert b'id="root"' in doms[url] and b"<li>" in doms[url]  # the scripts' work, not the empty root
        assert shots[url].startswith(b"\x89PNG\r\n")


def test_rendered_pages_replay_in_pywb_as_they_were_rendered(crawled, tmp_path) -> None:
    """pywb serves each kind of script-made page from the archive in headless Chromium that can
    reach nothing but pywb: the same visible text as the rendered DOM the crawl stored, the same
    images loaded as the live render asked for, and no request escapes."""
    import asyncio
    from urllib.parse import urljoin

    from browser_cdp import browser
    from pywb_replay import index_collection, pywb
    from selectolax.lexbor import LexborHTMLParser

    from raycrawl.text import page_text

    manifest, out, _ = crawled
    rendered = {rec.url: rec for rec in iter_link_records(out, "rendered") if rec.error is None}
    one_each: dict[str, str] = {}
    for url in sorted(rendered):
        one_each.setdefault(_script_kind(manifest.pages[url]), url)
    pages = sorted(one_each.values())
    assert len(pages) >= 7
    doms = {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "resource" and uri.startswith("urn:dom:") and uri[8:] in pages:
                    doms[uri[8:]] = rec.content_stream().read()
    stamp = index_collection(out, tmp_path / "pywb")

    async def replay(port: int) -> dict[str, tuple[str, set[str], list[str]]]:
        prefix = f"http://127.0.0.1:{port}/"
        seen = {}
        async with browser(tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1") as b:
            await b.call("Network.enable")
            b.dismiss_dialogs = True
            for url in pages:
                b.events.clear()
                await b.call("Page.navigate", url=f"{prefix}crawl/{stamp[url]}mp_/{url}")
                # pywb shows the page in its replay frame (same origin: its document is ours to read)
                await b.wait_for(f"{FRAME} && {FRAME}.readyState === 'complete' && {FRAME}.getElementById('root')")
                for _ in range(12):  # scroll as the renderer does: lazy images, the infinite list
                    await b.evaluate(f"{FRAME}.defaultView.scrollTo(0, {FRAME}.documentElement.scrollHeight)")
                    await asyncio.sleep(0.15)
                html = await b.evaluate(f"{FRAME}.getElementById('root').outerHTML")
                images = await b.evaluate(f"[...{FRAME}.images].filter(i => i.complete && i.naturalWidth > 0)"
                                          ".map(i => i.currentSrc)")
                requests = [e["params"]["request"]["url"] for e in b.events if e["method"] == "Network.requestWillBeSent"]
                escaped = [u for u in requests if not u.startswith((prefix, "data:", "about:", "blob:", "chrome"))]
                seen[url] = (html, {u.split("_/", 1)[1] for u in images if "_/" in u}, escaped)
        return seen

    with pywb(tmp_path / "pywb") as port:
        seen = asyncio.run(replay(port))
    for url in pages:
        html, images, escaped = seen[url]
        assert not escaped, (url, escaped)
        assert html is not None, (url, _script_kind(manifest.pages[url]), images)
        stored = LexborHTMLParser(doms[url].decode()).css_first("#root").html
        assert page_text(html.encode(), "utf-8").split() == page_text(stored.encode(), "utf-8").split(), url
        # (the <img> elements' images: a stylesheet's background image is no element's)
        shown = {urljoin(url, n.attributes["src"]) for n in LexborHTMLParser(doms[url].decode()).css("img[src]")}
        asked = {u for u in rendered[url].embeds if u.endswith(".png") and u in shown}
        assert images == asked, (url, _script_kind(manifest.pages[url]), images, asked)
