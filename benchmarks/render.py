"""Rendered pages per second and CPU per rendered page: raycrawl's renderer (actors/visit/renderer.py)
beside a bare Playwright loop over the same pages, the ceiling (issue 52).

Both drive the system's Chromium through Playwright, every request answered from the same
in-memory archive (no network): single-page-application pages whose links, text and a
``fetch()``-loaded list are made by scripts. The bare loop loads each page in one reused tab and
reads its DOM and links; the renderer scrolls to the end, waits for the network to settle
(``settle`` seconds without a request) and recycles its browser, one page at a time and then in
``--tabs`` tabs at once (as the crawl's render actor runs it). Each runs in a process of its own;
CPU is that process's and its children's (the Playwright driver, Chromium's processes), from
``getrusage``. The bare loop knows when each page is done (it waits for the page's 25 links),
which a crawler cannot: it is the ceiling, not a peer.

    .venv/bin/python benchmarks/render.py                  # 200 pages each
    .venv/bin/python benchmarks/render.py --pages 500 --settle 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time

APP = """<!doctype html><html><head><title>page {i}</title></head><body><div id="root"></div><script>
const root = document.getElementById('root');
root.innerHTML = '<h1>Page {i}</h1><p>' + 'Words the script writes for page {i}. '.repeat(30) + '</p>';
for (let k = 0; k < 20; k++) {{ const a = document.createElement('a'); a.href = '/p/' + (({i} + k) % {n}); a.textContent = 'to ' + k; root.appendChild(a); }}
fetch('/api/{i}.json').then(r => r.json()).then(xs => xs.forEach(x => {{ const a = document.createElement('a'); a.href = x; root.appendChild(a); }}));
</script></body></html>"""


def archive(n: int) -> dict:
    from raycrawl.actors.visit.renderer import Resource

    web = {}
    for i in range(n):
        web[f"http://app.test/p/{i}"] = Resource(200, {"content-type": "text/html"}, APP.format(i=i, n=n).encode())
        web[f"http://app.test/api/{i}.json"] = Resource(200, {"content-type": "application/json"},
                                                        json.dumps([f"/item/{i}/{j}" for j in range(5)]).encode())
    return web


async def raycrawl_loop(n: int, settle: float, tabs: int = 1) -> int:
    from raycrawl.actors.visit.renderer import Renderer

    web = archive(n)
    r = Renderer(settle=settle, tabs=tabs)
    try:  # (every page handed over at once: the renderer renders ``tabs`` at a time, as the render actor does)
        outs = await asyncio.gather(*(r.render(f"http://app.test/p/{i}", web) for i in range(n)))
    finally:
        await r.close()
    assert all(out.error is None for out in outs), [out.error for out in outs if out.error][:3]
    return sum(len(out.links) for out in outs)


async def bare_loop(n: int) -> int:
    from playwright.async_api import async_playwright

    from raycrawl.chromium import find_browser

    web = archive(n)
    links = 0
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=find_browser(), args=["--no-sandbox", "--disable-dev-shm-usage"])
        context = await browser.new_context()

        async def answer(route, request) -> None:  # noqa: ANN001
            found = web.get(request.url)
            if found is None:
                await route.abort()
            else:
                await route.fulfill(status=found.status, headers=found.headers, body=found.body)

        await context.route("**/*", answer)
        page = await context.new_page()
        for i in range(n):
            await page.goto(f"http://app.test/p/{i}", wait_until="load")
            # It knows when a page is done (its 25 links: 20 written, 5 fetched), which a crawler cannot.
            await page.wait_for_function("document.querySelectorAll('a[href]').length >= 25")
            await page.content()
            links += len(await page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"))
        await browser.close()
    return links


def child(kind: str, n: int, settle: float, tabs: int) -> None:
    t0 = time.monotonic()
    links = asyncio.run(bare_loop(n) if kind == "bare" else raycrawl_loop(n, settle, tabs if kind == "tabs" else 1))
    print(json.dumps({"pages": n, "links": links, "seconds": time.monotonic() - t0}))


def measure(kind: str, n: int, settle: float, tabs: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--pages", str(n), "--settle", str(settle),
                           "--tabs", str(tabs)],
                          capture_output=True, text=True, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{kind}: {done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--settle", type=float, default=0.3, help="the renderer's settle time (its default 0.3 s)")
    ap.add_argument("--tabs", type=int, default=4, help="the renderer's tabs in the third run (the crawl's default 4)")
    ap.add_argument("--child", choices=("raycrawl", "bare", "tabs"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.pages, args.settle, args.tabs)
        return
    rows = {kind: measure(kind, args.pages, args.settle, args.tabs) for kind in ("bare", "raycrawl", "tabs")}
    print(f"{'':10} {'pages/s':>9} {'CPU ms/page':>12} {'links/page':>11}")
    for kind, r in rows.items():
        print(f"{kind:10} {r['pages'] / r['seconds']:9.2f} {1000 * r['cpu_s'] / r['pages']:12.1f} "
              f"{r['links'] / r['pages']:11.1f}")
    bare = rows["bare"]
    for kind in ("raycrawl", "tabs"):
        ours = rows[kind]
        print(f"{kind} / bare: pages/s {(ours['pages'] / ours['seconds']) / (bare['pages'] / bare['seconds']):.2f}, "
              f"CPU per page {ours['cpu_s'] / bare['cpu_s']:.2f}")


if __name__ == "__main__":
    main()
