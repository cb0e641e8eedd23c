"""Rendering a page in headless Chromium that has no network of its own (issue 52, its first part).

The system's Chromium (Debian's ``chromium``, on PATH or named) driven by Playwright for Python
(launched with ``executable_path``: no browser download; Playwright because it is the kept library
that speaks the DevTools protocol for us — request interception, dialogs, crashes — where our tests'
raw CDP client would have to grow all of it). Every request the page makes is answered from
``resources`` — what the crawl has archived — and nothing else: what is missing (a ``fetch()``
call, a lazy image) is aborted and reported in :attr:`Rendered.missing`, for the crawl to fetch
politely and render the page again. So no request of the browser's ever leaves it.

A render (in the browser's one tab, as a person browsing): load, dismiss dialogs, scroll to the end until the page stops growing (lazy images,
infinite lists; ``max_scrolls``), wait until no request came for ``settle`` seconds, then read the
DOM, its visible text and its links; the whole within ``timeout`` seconds. A page that outlives it
(a script that never yields) or kills its renderer (a memory eater) is recorded as failed
(``timeout``, ``crashed``) and the browser is started afresh; the browser is also restarted after
``renders_per_browser`` renders and when its processes' memory passes ``max_rss_mb``.

Not yet wired into the crawl (the render stage, the requisite rounds, the WARC resource records,
websim's JavaScript web: issue 52's other parts).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raycrawl.errors import UserError

log = logging.getLogger(__name__)

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@dataclass(frozen=True)
class Resource:
    """What the archive answers for one URL."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Rendered:
    url: str
    dom: str = ""
    """``document.documentElement.outerHTML`` after the scripts ran."""
    text: str = ""
    """The body's visible text (``innerText``)."""
    links: list[str] = field(default_factory=list)
    """``a[href]`` and ``area[href]`` of the rendered DOM, absolute, first occurrence each."""
    requested: list[str] = field(default_factory=list)
    """Every URL the page asked for, in order (the page's own first)."""
    missing: list[str] = field(default_factory=list)
    """Those not in ``resources``: aborted, for the crawl to fetch before rendering again."""
    error: str | None = None
    """None, ``timeout`` or ``crashed`` (what there was of the DOM is kept)."""
    screenshot: bytes = b""
    """A PNG of the viewport once settled, when the renderer takes them."""
    seconds: float = 0.0


def find_browser(name: str | None = None) -> str:
    """The Chromium to drive: ``name`` (a path or a command), else the first of :data:`BROWSERS` on PATH."""
    for candidate in [name] if name else BROWSERS:
        path = shutil.which(candidate) if candidate else None
        if path:
            return path
    raise UserError(f"no Chromium found ({name or ', '.join(BROWSERS)}): install Debian's chromium, or name one")


def _children_rss_mb(exe: str) -> float:
    """Resident memory of this process's descendants that run ``exe`` (the browser's processes)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    me, total = os.getpid(), 0.0
    real = os.path.realpath(exe)
    for pid in parents:
        p, hops = pid, 0
        while p in parents and p != me and hops < 20:
            p, hops = parents[p], hops + 1
        if p != me or pid == me:
            continue
        try:
            if os.path.realpath(f"/proc/{pid}/exe") != real:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def _answer_dialog(dialog) -> None:  # noqa: ANN001 - a Playwright dialog
    """Alerts, confirms and prompts dismissed; a "leave this page?" accepted, or the next page waits."""
    asyncio.ensure_future(dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())


class Renderer:
    """One browser, one page at a time. ``start`` before the first :meth:`render`; ``close`` after."""

    def __init__(self, executable: str | None = None, *, timeout: float = 15.0, settle: float = 0.3,
                 max_scrolls: int = 20, renders_per_browser: int = 200, max_rss_mb: float = 1500.0,
                 js_heap_mb: int | None = None, user_agent: str | None = None, screenshot: bool = False) -> None:
        self.executable = find_browser(executable)
        self.timeout, self.settle, self.max_scrolls = timeout, settle, max_scrolls
        self.renders_per_browser, self.max_rss_mb = renders_per_browser, max_rss_mb
        self.js_heap_mb, self.user_agent, self.screenshot = js_heap_mb, user_agent, screenshot
        self._pw = None
        self._browser = None
        self._context = None
        self._page = None
        # The render under way (one at a time): what the context's request handler answers from.
        self._resources: Mapping[str, Resource] = {}
        self._out = Rendered("")
        self._last_request = 0.0
        self.renders = 0  # by the current browser
        self.launches = 0

    async def start(self) -> None:
        from playwright.async_api import async_playwright

        if self._pw is None:
            self._pw = await async_playwright().start()
        await self._launch()

    async def _launch(self) -> None:
        args = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"]
        if self.js_heap_mb:
            args.append(f"--js-flags=--max-old-space-size={self.js_heap_mb}")
        self._browser = await self._pw.chromium.launch(executable_path=self.executable, args=args)
        # One context and one tab a browser, as a person browsing: a fresh context a page cost 346
        # CPU-ms a page, a fresh tab in one context 314, one tab 84 (the bare loop's 71;
        # benchmarks/render.py, 100 pages); cookies cleared before each page. A crash or a hang
        # starts a new browser (and so a new tab).
        self._context = await self._browser.new_context(service_workers="block", user_agent=self.user_agent)
        await self._context.route("**/*", self._answer)
        self._page = None
        self.renders = 0
        self.launches += 1

    async def _answer(self, route, request) -> None:  # noqa: ANN001 - Playwright's
        """Every request of the page: from the archive given, or aborted and reported missing."""
        self._out.requested.append(request.url)
        self._last_request = time.monotonic()
        found = self._resources.get(request.url)
        if found is None:
            self._out.missing.append(request.url)
            await route.abort()
        else:
            await route.fulfill(status=found.status, headers=found.headers, body=found.body)

    async def _restart(self, why: str) -> None:
        log.info("restarting the browser: %s", why)
        browser, self._browser, self._context = self._browser, None, None
        if browser is not None:
            try:
                await asyncio.wait_for(browser.close(), 10)
            except Exception as exc:  # noqa: BLE001 - a browser that hangs or died: its processes go with the driver's kill
                log.warning("the browser did not close cleanly: %r", exc)
        await self._launch()

    async def close(self) -> None:
        if self._browser is not None:
            try:
                await asyncio.wait_for(self._browser.close(), 10)
            except Exception as exc:  # noqa: BLE001
                log.warning("the browser did not close cleanly: %r", exc)
            self._browser = None
        if self._pw is not None:
            await self._pw.stop()
            self._pw = None

    async def render(self, url: str, resources: Mapping[str, Resource]) -> Rendered:
        """Render ``url`` with every request answered from ``resources`` (never the network)."""
        if self._browser is None:
            await self.start()
        if self.renders >= self.renders_per_browser:
            await self._restart(f"{self.renders} renders")
        elif self.max_rss_mb and _children_rss_mb(self.executable) > self.max_rss_mb:
            await self._restart(f"its processes hold more than {self.max_rss_mb:.0f} MB")
        self.renders += 1
        out = self._out = Rendered(url)
        self._resources, self._last_request = resources, time.monotonic()
        started = time.monotonic()
        try:
            await self._context.clear_cookies()
            if self._page is None:
                self._page = await self._context.new_page()
                self._page.on("dialog", _answer_dialog)
            await asyncio.wait_for(self._render(self._page, out), self.timeout)
        except TimeoutError:
            out.error = "timeout"
        except Exception as exc:  # noqa: BLE001 - Playwright's errors: the page or the browser went away
            out.error = "crashed"
            log.info("render of %s failed: %r", url, exc)
        finally:
            if out.error is not None:
                await self._restart(f"{out.error} rendering {url}")  # (its tab goes with it)
            self._resources = {}
        out.seconds = time.monotonic() - started
        return out

    async def _render(self, page, out: Rendered) -> None:  # noqa: ANN001 - a Playwright page
        crashed = asyncio.get_running_loop().create_future()

        def on_crash(_page) -> None:  # noqa: ANN001
            if not crashed.done():
                crashed.set_result(True)

        page.on("crash", on_crash)

        async def behave() -> None:
            await page.goto(out.url, wait_until="load")
            height = -1
            for _ in range(self.max_scrolls):  # to the end, while the page grows
                now = await page.evaluate("document.documentElement.scrollHeight")
                if now == height:
                    break
                height = now
                await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
                await page.wait_for_timeout(100)
            while time.monotonic() - self._last_request < self.settle:  # the network settles
                await page.wait_for_timeout(self.settle * 1000 / 3)
            out.dom = await page.content()
            out.text = await page.evaluate("document.body ? document.body.innerText : ''")
            links = await page.eval_on_selector_all("a[href], area[href]", "els => els.map(e => e.href)")
            out.links = list(dict.fromkeys(u for u in links if u.startswith(("http://", "https://"))))
            if self.screenshot:
                await page.evaluate("window.scrollTo(0, 0)")
                out.screenshot = await page.screenshot(type="png")

        work = asyncio.ensure_future(behave())
        try:
            done, _ = await asyncio.wait({work, crashed}, return_when=asyncio.FIRST_COMPLETED)
            if crashed in done:
                raise RuntimeError("the page crashed its renderer")
            work.result()
        finally:
            for f in (work, crashed):
                if not f.done():
                    f.cancel()
            if work.done() and not work.cancelled():
                work.exception()  # (read: a crash's or a timeout's leftover is not "never retrieved")
            page.remove_listener("crash", on_crash)
