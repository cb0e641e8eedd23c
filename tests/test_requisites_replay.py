"""Archives that replay as pages (issue 32), on one crawl of a websim whose pages need stylesheets
(with an ``@import`` and ``url()``s), scripts, images (with a 2x ``srcset``) and a font and a
library from a shared CDN host outside the crawl's scope:

* replayed through pywb in headless Chromium that can reach nothing but pywb, every requisite a
  page needs is answered from the archive, and no request escapes;
* a second crawl with ``--dedup-index`` of the first stores the payloads the first archived as
  revisits of its captures — only byte-identical ones (warcio and a fresh fetch are the judges) —
  its WARC no longer holds those bytes, and pywb replays the revisits from the first WARC."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from raycrawl.storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
PAGES = 6  # replayed in the browser


def _needed(manifest, url: str) -> set[str]:
    """What a browser at 1x loads to show ``url`` (websim's manifest: its embeds, a stylesheet's
    own, transitively), without the 2x srcset alternates a 1x screen skips."""
    out, todo = set(), list(manifest.pages[url]["embeds"])
    while todo:
        u = todo.pop()
        if u in out or u.endswith("@2x.png"):
            continue
        out.add(u)
        todo += manifest.pages[u]["embeds"]
    return out


def _crawl(web, out: Path, *extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                        "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                        "--host-delay", "0.05", "--ip-delay", "0.0", *extra],
                       capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """(websim, its manifest, the CDN host, the scope config, the first crawl's directory, its audit)."""
    from raycrawl.websim import Websim

    tmp = tmp_path_factory.mktemp("requisites")
    with Websim(hosts=6, ips=2, seed=3, clean=True, pages_per_host_mean=5, requisites=True, out_dir=tmp / "web") as web:
        manifest = web.manifest
        # The crawl's scope is every host but the shared CDN: its pages are not crawled, but what
        # the other hosts' pages need from it is (a requisite's hop out of scope, as Heritrix's).
        cdn = next(p["host"] for p in manifest.pages.values() if p["kind"] == "font")
        config = tmp / "scope.toml"
        surts = [",".join(reversed(h.split("."))) + "," for h in manifest.hosts if h != cdn]  # a host and below
        config.write_text(f"scope_allow_surts = {json.dumps(surts)}\n")
        out = tmp / "crawl"
        _crawl(web, out, "--config", str(config))
        report = web.audit(0.05, 0.0)
        yield web, manifest, cdn, config, out, report


def test_pages_replay_in_a_browser_with_all_their_requisites(crawled, tmp_path) -> None:
    from browser_cdp import browser
    from pywb_replay import index_collection, pywb

    _, manifest, cdn, _, out, report = crawled
    assert not report.violations, report.violations[:5]
    records = {rec.url: rec for rec in iter_link_records(out)}
    crawled = [u for u, p in manifest.pages.items() if p["kind"] == "html" and u in records]
    assert crawled and not [u for u in crawled if manifest.pages[u]["host"] == cdn]  # the scope held for pages
    requisites = set().union(*(_needed(manifest, u) for u in crawled))
    from_cdn = {u for u in requisites if manifest.pages[u]["host"] == cdn}
    assert from_cdn and requisites <= set(records), sorted(requisites - set(records))[:5]
    assert all(records[u].status == 200 for u in requisites)
    html = sorted(u for u in crawled if manifest.pages[u]["embeds"] and records[u].status == 200)[:PAGES]
    assert len(html) == PAGES
    stamp = index_collection(out, tmp_path / "pywb")

    async def replay(port: int) -> dict[str, tuple[set[str], set[str], list[str]]]:
        prefix = f"http://127.0.0.1:{port}/"
        seen = {}
        # Every name resolves to nothing but 127.0.0.1 (pywb): a request that escapes the archive fails and is counted.
        async with browser(tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1") as b:
            await b.call("Network.enable")
            for url in html:
                b.events.clear()
                # (pywb's client side puts the page into its replay frame: wait for that page)
                await b.call("Page.navigate", url=f"{prefix}crawl/{stamp[url]}mp_/{url}")
                await b.wait_for(f"document.readyState === 'complete' && location.href.startsWith('{prefix}crawl/')")
                await b.evaluate("document.fonts.ready.then(() => true)")
                for _ in range(6):  # let late loads (fonts, background images) report in
                    await asyncio.sleep(0.25)
                    await b.evaluate("1")
                requests = {e["params"]["requestId"]: e["params"]["request"]["url"]
                            for e in b.events if e["method"] == "Network.requestWillBeSent"}
                status = {e["params"]["requestId"]: e["params"]["response"]["status"]
                          for e in b.events if e["method"] == "Network.responseReceived"}
                answered, failed, escaped = set(), set(), []
                for rid, u in requests.items():
                    if u.startswith(("data:", "about:", "blob:", "chrome")):
                        continue
                    if not u.startswith(prefix):
                        escaped.append(u)
                        continue
                    original = u.split("_/", 1)[1] if "_/" in u else None
                    if original:
                        (answered if status.get(rid) == 200 else failed).add(original)
                seen[url] = (answered, failed, escaped)
        return seen

    with pywb(tmp_path / "pywb") as port:
        seen = asyncio.run(replay(port))
    for url in html:
        answered, failed, escaped = seen[url]
        need = _needed(manifest, url)
        assert need <= answered, (url, sorted(need - answered), sorted(failed))
        assert not escaped, (url, escaped)
    assert sum(len(_needed(manifest, u)) for u in html) >= PAGES * 6  # stylesheets, scripts, images, font


def _records(warc_dir: Path) -> list[dict]:
    out = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    h = rec.rec_headers
                    out.append({"type": rec.rec_type, "url": h.get_header("WARC-Target-URI"),
                                "date": h.get_header("WARC-Date"), "digest": h.get_header("WARC-Payload-Digest"),
                                "profile": h.get_header("WARC-Profile"),
                                "refers": (h.get_header("WARC-Refers-To-Target-URI"), h.get_header("WARC-Refers-To-Date")),
                                "status": rec.http_headers.get_statuscode() if rec.http_headers else None,
                                "payload": rec.content_stream().read()})
    return out


def _uncompressed(warc_dir: Path) -> int:
    total = 0
    for path in warc_dir.glob("*.warc.gz"):
        data = path.read_bytes()
        while data:
            d = zlib.decompressobj(wbits=31)
            total += len(d.decompress(data))
            data = d.unused_data
    return total


async def _fetch_again(web, urls: list[str]) -> dict[str, bytes]:
    import aiohttp

    from raycrawl.websim.client import HostsResolver

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=HostsResolver(web.hosts_file)),
                                     auto_decompress=True) as session:
        out = {}
        for url in urls:
            async with session.get(url, allow_redirects=False) as resp:
                out[url] = await resp.read()
        return out


def test_second_crawl_revisits_what_the_first_archived(crawled, tmp_path) -> None:
    from pywb_replay import check_replay, pywb

    web, _, _, config, first, _ = crawled
    second = tmp_path / "second"
    r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(first), "-o", str(tmp_path / "first.cdxj")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    # (websim still serves: the fixture's context is open for the whole module)
    _crawl(web, second, "--config", str(config), "--dedup-index", str(tmp_path / "first.cdxj"))
    one, two = _records(first / "warc"), _records(second / "warc")
    by_second = {}  # (URL, WARC-Date to the second) → payload, of the first crawl's responses
    for rec in one:
        if rec["type"] == "response":
            by_second[rec["url"], rec["date"][:19]] = rec
    # (a second crawl's revisits of its own captures, its exact duplicates, are not these)
    revisits = [r for r in two if r["type"] == "revisit" and (r["refers"][0], (r["refers"][1] or "")[:19]) in by_second]
    again = asyncio.run(_fetch_again(web, [r["url"] for r in revisits]))
    assert len(revisits) > 20, len(revisits)
    unchanged = 0
    for rev in revisits:
        original = by_second[rev["refers"][0], rev["refers"][1][:19]]
        assert rev["profile"].endswith("/identical-payload-digest") and rev["digest"] == original["digest"], rev
        assert again[rev["url"]] == original["payload"], rev["url"]  # the bytes really were the same
        unchanged += len(original["payload"])
    # every 200 response of the second crawl whose payload the first archived became a revisit
    # (robots.txt excepted: stored whole every time, the evidence of the policy obeyed)
    archived = {r["digest"] for r in one if r["type"] == "response"}
    stored_again = [r["url"] for r in two if r["type"] == "response" and r["status"] == "200" and r["digest"] in archived
                    and not r["url"].endswith("/robots.txt")]
    assert not stored_again, stored_again[:5]
    # its WARC no longer holds those bytes (a revisit's head is a few hundred bytes longer than a response's)
    size1, size2 = _uncompressed(first / "warc"), _uncompressed(second / "warc")
    assert size1 - size2 >= unchanged - 400 * len(revisits), (size1, size2, unchanged, len(revisits))
    # pywb replays the second crawl's revisits from the first crawl's WARC (one collection holds both)
    coll = tmp_path / "pywb" / "collections" / "both"
    for crawl in (first, second):
        r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(crawl), "--pywb", str(coll)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr
    expected = {(rev["url"], "".join(c for c in rev["date"] if c.isdigit())[:14]):
                (int(rev["status"]), by_second[rev["refers"][0], rev["refers"][1][:19]]["payload"]) for rev in revisits}
    with pywb(tmp_path / "pywb") as port:
        check_replay(port, "both", expected)
