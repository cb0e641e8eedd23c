"""Rendering a page in headless Chromium that has no network of its own (issue 52).

The system's Chromium (Debian's ``chromium``, on PATH or named) driven by Playwright for Python
(launched with ``executable_path``: no browser download; Playwright because it is the kept library
that speaks the DevTools protocol for us — request interception, dialogs, crashes — where our tests'
raw CDP client would have to grow all of it). Every request the page makes is answered from
``resources`` — what the crawl has archived — and nothing else: what is missing (a ``fetch()``
call, a lazy image) is aborted and reported in :attr:`Rendered.missing`, for the crawl to fetch
politely and render the page again. So no request of the browser's ever leaves it.

A render (in a tab of the browser, as a person browsing): load, dismiss dialogs, scroll to the end until the page stops growing (lazy images,
infinite lists; ``max_scrolls``), wait until every image asked for is answered and no request came
for ``settle`` seconds, then read the
DOM, its visible text and its links; the whole within ``timeout`` seconds. A page that outlives it
(a script that never yields) or kills its renderer (a memory eater) is recorded as failed
(``timeout``, ``crashed``) and its tab is closed (a new one takes its place); a page out of time
that still answers is read as it stands first (a busy machine slowed it: what its scripts made by
then is kept, its record still says ``timeout``); the browser is
restarted after ``renders_per_browser`` renders, when its processes' memory passes ``max_rss_mb``
and when it went away, once the renders under way have ended. ``tabs`` renders run at once.

The crawl's render stage (actors/visit/stages/render.py) drives it through the render actor
(actors/visit/render_actor.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raycrawl.chromium import find_browser

log = logging.getLogger(__name__)

SCREENSHOT_SECONDS = 5.0
# A render out of time is read as it stands if the page still answers within this (a script that
# never yields does not; a page slowed by a busy machine does, and its scripts' links are kept).
AS_IT_STANDS_SECONDS = 3.0
# Scroll to the end and wait for the scroll event the page's handlers get: the browser dispatches it
# with its next frame, and a frame may come long after (a page slow to paint, a loaded machine: an
# infinite list measured before its handler ran looked finished after one step). Ours is added
# last, so it runs after theirs; at most SCROLL_EVENT_MS. Already at the end (no event will come),
# two animation frames or 250 ms (a page with nothing to paint may get no frame for seconds).
SCROLL_EVENT_MS = 10_000
SCROLL_TO_END = f"""new Promise(done => {{ const y = scrollY; let ended = false;
  const end = () => {{ if (!ended) {{ ended = true; done(document.documentElement.scrollHeight); }} }};
  window.scrollTo(0, document.documentElement.scrollHeight);
  if (scrollY !== y) {{ addEventListener('scroll', () => setTimeout(end, 0), {{once: true}});
    setTimeout(end, {SCROLL_EVENT_MS}); }}
  else {{ requestAnimationFrame(() => requestAnimationFrame(end)); setTimeout(end, 250); }} }})"""
# Every image asked for has its answer (loaded, or broken: aborted as missing). One the browser
# defers (``loading=lazy``) is asked for once in view, and not while out of it or not drawn at all
# (no box: ``display: none``). At most IMAGES_SECONDS.
IMAGES_ANSWERED = ("[...document.images].every(i => i.complete || i.loading === 'lazy' && ("
                   "i.getClientRects().length === 0 || (r => r.bottom < 0 || r.top > innerHeight"
                   " || r.right < 0 || r.left > innerWidth)(i.getBoundingClientRect())))")
IMAGES_SECONDS = 3.0
# The DOM as Playwright's ``page.content()`` serialises it, its visible text and links, and whether
# its images are answered, read at one moment.
READ_PAGE = f"""() => {{ const d = document;
  let dom = d.doctype ? new XMLSerializer().serializeToString(d.doctype) : '';
  if (d.documentElement) dom += d.documentElement.outerHTML;
  return {{answered: {IMAGES_ANSWERED}, dom, text: d.body ? d.body.innerText : '',
          links: [...d.querySelectorAll('a[href], area[href]')].map(e => e.href)}}; }}"""


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
    """None, ``timeout`` or ``crashed`` (a timeout's DOM as it stood, if the page still answered)."""
    screenshot: bytes = b""
    """A PNG of the viewport once settled, when the renderer takes them."""
    seconds: float = 0.0


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


def _take(out: Rendered, read: dict) -> None:
    """What READ_PAGE read into ``out``."""
    out.dom, out.text = read["dom"], read["text"]
    out.links = list(dict.fromkeys(u for u in read["links"] if u.startswith(("http://", "https://"))))


def _answer_dialog(dialog) -> None:  # noqa: ANN001 - a Playwright dialog
    """Alerts, confirms and prompts dismissed; a "leave this page?" accepted, or the next page waits."""
    asyncio.ensure_future(dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())


@dataclass
class _Job:
    """A render under way in one tab: what its requests are answered from, what it found."""

    resources: Mapping[str, Resource]
    out: Rendered
    last_request: float


class Renderer:
    """One browser, ``tabs`` pages at a time, each in a tab of its own. ``start`` before the first
    :meth:`render`; ``close`` after."""

    def __init__(self, executable: str | None = None, *, timeout: float = 15.0, settle: float = 0.3,
                 max_scrolls: int = 20, renders_per_browser: int = 200, max_rss_mb: float = 1500.0,
                 js_heap_mb: int | None = None, user_agent: str | None = None, screenshot: bool = False,
                 tabs: int = 1) -> None:
        self.executable = find_browser(executable)
        self.timeout, self.settle, self.max_scrolls = timeout, settle, max_scrolls
        self.renders_per_browser, self.max_rss_mb = renders_per_browser, max_rss_mb
        self.js_heap_mb, self.user_agent, self.screenshot = js_heap_mb, user_agent, screenshot
        self.tabs = tabs
        self._pw = None
        self._browser = None
        self._context = None
        self._free: asyncio.Queue | None = None  # tabs not rendering (None: not opened yet)
        self._jobs: dict[object, _Job] = {}  # tab → its render under way
        self._active = 0  # renders under way
        self._recycling = False
        self._cond: asyncio.Condition | None = None
        self._broken = False  # a tab that would not close: the browser is restarted when idle
        self.renders = 0  # by the current browser
        self.launches = 0

    async def start(self) -> None:
        from playwright.async_api import async_playwright

        if self._cond is None:
            self._cond = asyncio.Condition()
        if self._pw is None:
            self._pw = await async_playwright().start()
        await self._launch()

    async def _launch(self) -> None:
        args = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"]
        if self.js_heap_mb:
            args.append(f"--js-flags=--max-old-space-size={self.js_heap_mb}")
        self._browser = await self._pw.chromium.launch(executable_path=self.executable, args=args)
        # One context a browser and a tab per concurrent render, kept from page to page, as a person
        # browsing: a fresh context a page cost 346 CPU-ms a page, a fresh tab in one context 314,
        # one tab 84 (the bare loop's 71; benchmarks/render.py, 100 pages); cookies cleared before
        # each page. A page that hangs or crashes loses its tab (a new one takes its place).
        self._context = await self._browser.new_context(service_workers="block", user_agent=self.user_agent)
        await self._context.route("**/*", self._answer)
        self._free = asyncio.Queue()
        for _ in range(self.tabs):
            self._free.put_nowait(None)  # (opened on first use)
        self._broken = False
        self.renders = 0
        self.launches += 1

    async def _answer(self, route, request) -> None:  # noqa: ANN001 - Playwright's
        """Every request of a page: from the archive given to its render, or aborted and reported missing."""
        try:
            job = self._jobs.get(request.frame.page)
        except Exception:  # noqa: BLE001 - a request of no page (a worker's): nothing to answer it from
            job = None
        if job is None:
            await route.abort()
            return
        job.out.requested.append(request.url)
        job.last_request = time.monotonic()
        found = job.resources.get(request.url)
        if found is None:
            job.out.missing.append(request.url)
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

    def _recycle_why(self) -> str | None:
        if not self._browser.is_connected() or self._broken:
            return "it went away"
        if self.renders >= self.renders_per_browser:
            return f"{self.renders} renders"
        if self.max_rss_mb and _children_rss_mb(self.executable) > self.max_rss_mb:
            return f"its processes hold more than {self.max_rss_mb:.0f} MB"
        return None

    async def render(self, url: str, resources: Mapping[str, Resource]) -> Rendered:
        """Render ``url`` with every request answered from ``resources`` (never the network).
        Up to ``tabs`` renders run at once; a browser due for a restart waits for them to end."""
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            if self._browser is None:  # (the first render starts it; the others wait for it)
                await self.start()
            await self._cond.wait_for(lambda: not self._recycling)
            why = self._recycle_why()
            if why is not None:
                self._recycling = True
                try:
                    await self._cond.wait_for(lambda: self._active == 0)
                    await self._restart(why)
                finally:
                    self._recycling = False
                    self._cond.notify_all()
            self.renders += 1
            self._active += 1
        try:
            return await self._in_a_tab(url, resources)
        finally:
            async with self._cond:
                self._active -= 1
                self._cond.notify_all()

    async def _in_a_tab(self, url: str, resources: Mapping[str, Resource]) -> Rendered:
        page = await self._free.get()
        out = Rendered(url)
        job = _Job(resources, out, time.monotonic())
        started = time.monotonic()
        try:
            if page is None:
                page = await self._context.new_page()
                page.on("dialog", _answer_dialog)
            self._jobs[page] = job
            await self._context.clear_cookies()
            await asyncio.wait_for(self._render(page, job), self.timeout)
            if self.screenshot:  # (the page is read: a screenshot that does not come in time is only missing)
                try:
                    await page.evaluate("window.scrollTo(0, 0)")
                    out.screenshot = await page.screenshot(type="png", timeout=SCREENSHOT_SECONDS * 1000)
                except Exception as exc:  # noqa: BLE001 - Playwright's timeout or a page gone meanwhile
                    log.info("no screenshot of %s: %r", url, exc)
        except TimeoutError:
            out.error = "timeout"
            await self._as_it_stands(page, out)
        except Exception as exc:  # noqa: BLE001 - Playwright's errors: the page or the browser went away
            out.error = "crashed"
            log.info("render of %s failed: %r", url, exc)
        finally:
            self._jobs.pop(page, None)
            if out.error is not None and page is not None:  # its tab goes (a new one takes its place)
                try:
                    await asyncio.wait_for(page.close(run_before_unload=False), 10)
                except Exception as exc:  # noqa: BLE001 - a tab that will not close: a new browser when idle
                    log.warning("a tab did not close after %s rendering %s: %r", out.error, url, exc)
                    self._broken = True
                page = None
            self._free.put_nowait(page)
        out.seconds = time.monotonic() - started
        return out

    @staticmethod
    async def _as_it_stands(page, out: Rendered) -> None:  # noqa: ANN001 - a Playwright page
        """The DOM, text and links of a render out of time, if its page still answers."""
        if out.dom or page.url == "about:blank":  # (read already, or its navigation never committed)
            return
        try:
            _take(out, await asyncio.wait_for(page.evaluate(READ_PAGE), AS_IT_STANDS_SECONDS))
        except Exception as exc:  # noqa: BLE001 - no answer in time, or the page went meanwhile: nothing read
            log.info("%s timed out and could not be read: %r", out.url, exc)

    async def _render(self, page, job: _Job) -> None:  # noqa: ANN001 - a Playwright page
        from playwright.async_api import TimeoutError as PlaywrightTimeout  # (loaded with the browser)

        out = job.out
        crashed = asyncio.get_running_loop().create_future()

        def on_crash(_page) -> None:  # noqa: ANN001
            if not crashed.done():
                crashed.set_result(True)

        page.on("crash", on_crash)

        async def behave() -> None:
            await page.goto(out.url, wait_until="load")
            height, still = await page.evaluate("document.documentElement.scrollHeight"), 0
            for _ in range(self.max_scrolls):  # to the end, until the page has not changed twice
                asked = seen = len(out.requested)
                now = await page.evaluate(SCROLL_TO_END)
                await page.wait_for_timeout(100)  # (what the handlers asked for may come back)
                # What the scroll asked for is answered and drawn before the page is measured: on a
                # loaded machine a scroll handler's fetch came late, and an infinite list measured
                # before its next items came looked finished (its last items lost).
                while len(out.requested) != seen:
                    seen = len(out.requested)
                    await page.wait_for_timeout(150)
                now = max(now, await page.evaluate("document.documentElement.scrollHeight"))
                still = still + 1 if now == height and seen == asked else 0
                if still >= 2:
                    break
                height = now
            # An image whose src a script has just set asks for it a moment later: under load, after
            # the loops above had seen the network quiet, so a DOM read then named an image whose
            # request the render never saw (and its replay then loaded). So the DOM is read, in one
            # step, with whether every image it names is answered; if not, again once they are.
            deadline = time.monotonic() + IMAGES_SECONDS
            while True:
                while time.monotonic() - job.last_request < self.settle:  # the network settles
                    await page.wait_for_timeout(self.settle * 1000 / 3)
                read = await page.evaluate(READ_PAGE)
                left = deadline - time.monotonic()
                if read["answered"] or left <= 0:
                    break
                try:
                    await page.wait_for_function(IMAGES_ANSWERED, polling=50, timeout=left * 1000)
                except PlaywrightTimeout:
                    log.info("images of %s still not loaded after %s s", out.url, IMAGES_SECONDS)
            _take(out, read)

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
