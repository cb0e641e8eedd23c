"""Archives that replay as pages (issue 32): a crawl of a websim whose pages need stylesheets (with
an ``@import`` and ``url()``s), scripts, images (with a 2x ``srcset``) and a font and a library from
a shared CDN host, replayed through pywb in headless Chromium that can reach nothing but pywb:
every requisite the page needs is answered from the archive, and no request escapes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_pages_replay_in_a_browser_with_all_their_requisites(tmp_path) -> None:
    from browser_cdp import browser
    from pywb_replay import pywb

    from raycrawl.websim import Websim

    with Websim(hosts=6, ips=2, seed=3, clean=True, pages_per_host_mean=5, requisites=True,
                out_dir=tmp_path / "web") as web:
        manifest = web.manifest
        # The crawl's scope is every host but the shared CDN: its pages are not crawled, but what
        # the other hosts' pages need from it is (a requisite's hop out of scope, as Heritrix's).
        cdn = next(p["host"] for p in manifest.pages.values() if p["kind"] == "font")
        config = tmp_path / "scope.toml"
        surts = [",".join(reversed(h.split("."))) + "," for h in manifest.hosts if h != cdn]  # a host and below
        config.write_text(f"scope_allow_surts = {json.dumps(surts)}\n")
        out = tmp_path / "crawl"
        r = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                            "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                            "--host-delay", "0.05", "--ip-delay", "0.0", "--config", str(config)],
                           capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert r.returncode == 0, r.stderr[-3000:]
        report = web.audit(0.05, 0.0)
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
    coll = tmp_path / "pywb" / "collections" / "crawl"
    r = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "index", str(out), "--pywb", str(coll)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    stamp = {json.loads(line.split(" ", 2)[2])["url"]: line.split(" ", 2)[1]
             for line in (coll / "indexes" / "crawl.cdxj").read_text().splitlines()}

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
