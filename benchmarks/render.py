"""Rendered pages per second and CPU per rendered page: raycrawl's renderer (actors/visit/renderer.py)
beside a bare Playwright loop over the same pages, the ceiling (issue 52).

Both drive the system's Chromium through Playwright, one page at a time, every request answered
from the same in-memory archive (no network): single-page-application pages whose links, text and a
``fetch()``-loaded list are made by scripts. The bare loop loads each page in one reused tab and
reads its DOM and links; the renderer gives each page a fresh context, scrolls to the end, waits
for the network to settle (``settle`` seconds without a request) and recycles its browser. Each
runs in a process of its own; CPU is that process's and its children's (the Playwright driver,
Chromium's processes), from ``getrusage``. The bare loop knows when each page is done (it waits for
the page's 25 links), which a crawler cannot: it is the ceiling, not a peer.

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


async def raycrawl_loop(n: int, settle: float) -> int:
    from raycrawl.actors.visit.renderer import Renderer

    web = archive(n)
    r = Renderer(settle=settle)
    links = 0
    try:
        for i in range(n):
            out = await r.render(f"http://app.test/p/{i}", web)
            assert out.error is None, out.error
            links += len(out.links)
    finally:
        await r.close()
    return links


async def bare_loop(n: int) -> int:
    from playwright.async_api import async_playwright

    from raycrawl.actors.visit.renderer import find_browser

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


def child(kind: str, n: int, settle: float) -> None:
    t0 = time.monotonic()
    links = asyncio.run(raycrawl_loop(n, settle) if kind == "raycrawl" else bare_loop(n))
    print(json.dumps({"pages": n, "links": links, "seconds": time.monotonic() - t0}))


def measure(kind: str, n: int, settle: float) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--pages", str(n), "--settle", str(settle)],
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
    ap.add_argument("--child", choices=("raycrawl", "bare"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.pages, args.settle)
        return
    rows = {kind: measure(kind, args.pages, args.settle) for kind in ("bare", "raycrawl")}
    print(f"{'':10} {'pages/s':>9} {'CPU ms/page':>12} {'links/page':>11}")
    for kind, r in rows.items():
        print(f"{kind:10} {r['pages'] / r['seconds']:9.2f} {1000 * r['cpu_s'] / r['pages']:12.1f} "
              f"{r['links'] / r['pages']:11.1f}")
    bare, ours = rows["bare"], rows["raycrawl"]
    print(f"raycrawl / bare: pages/s {(ours['pages'] / ours['seconds']) / (bare['pages'] / bare['seconds']):.2f}, "
          f"CPU per page {ours['cpu_s'] / bare['cpu_s']:.2f}")


if __name__ == "__main__":
    main()
