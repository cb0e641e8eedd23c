"""Headless Chromium driven over the DevTools protocol (a websocket on loopback), for tests that
click: open a page, evaluate JavaScript in it, wait for a navigation. Chromium is the Debian
package ``make setup`` installs; a test that needs it fails without it (never skipped)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
from pathlib import Path

import aiohttp
import pytest

# Headless Chromium (the whole browser since the old headless shell left it) still builds its
# omnibox's popups: WebUI pages in a renderer of their own that no page reaches and no one sees.
# Without them a launch costs half the CPU (~0.6 against ~1.2 CPU-s, Chromium 156, measured); a
# Chromium that does not know a feature's name ignores it. (Not for Playwright's launches: a second
# --disable-features would replace the list Playwright passes, and Chromium reads only the last.)
NO_BROWSER_UI = "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup"
# How the tests start headless Chromium themselves (the replay, console and search-page tests).
HEADLESS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-sync", "--disable-background-networking",
            "--disable-component-update", "--mute-audio", NO_BROWSER_UI)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("no chromium on PATH: `make setup` installs Debian's chromium package "
                "(apt-get install --no-install-recommends chromium)")


class NavigatedAway(AssertionError):
    """An evaluation the page's navigation cut off (CDP: "Inspected target navigated or closed")."""


class Browser:
    """One page of a headless Chromium; :meth:`evaluate` runs JavaScript in it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.ids = ws, itertools.count(1)
        self.events: list[dict] = []  # the protocol's events (Network.*, …) received while waiting
        self.dismiss_dialogs = False  # alerts and confirms answered "cancel" as they open (they block scripts)

    async def call(self, method: str, **params) -> dict:
        i = next(self.ids)
        await self.ws.send_json({"id": i, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), 30)
            if "method" in msg:
                self.events.append(msg)
                if self.dismiss_dialogs and msg["method"] == "Page.javascriptDialogOpening":
                    await self.ws.send_json({"id": next(self.ids), "method": "Page.handleJavaScriptDialog",
                                             "params": {"accept": False}})
            if msg.get("id") == i:
                if "error" in msg:
                    failed = NavigatedAway if "navigated or closed" in str(msg["error"]) else AssertionError
                    raise failed(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def evaluate(self, expression: str):  # noqa: ANN201 - whatever the expression returns
        res = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return res.get("result", {}).get("value")

    async def goto(self, url: str) -> None:
        assert url.startswith("http://127.0.0.1:")
        await self.call("Page.navigate", url=url)
        await self.wait_for(f"document.readyState === 'complete' && location.href.startsWith({json.dumps(url)})")

    async def wait_for(self, condition: str, timeout: float = 30) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        # A poll that meets a navigation (a form posted, a page loading) is cut off: it asks again
        # (a console test once failed on a click's form post landing during a poll).
        while True:
            with contextlib.suppress(NavigatedAway):
                if await self.evaluate(f"!!({condition})"):
                    return
            assert loop.time() < end, f"not true within {timeout} s: {condition}"
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def browser(tmp_path: Path, *flags: str):
    """``flags``: more Chromium switches (e.g. ``--host-resolver-rules=…``)."""
    profile = tmp_path / "chromium-profile"
    proc = await asyncio.create_subprocess_exec(
        chromium(), *HEADLESS, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
        f"--user-data-dir={profile}", *flags, "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                page = next(t for t in await r.json() if t["type"] == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                b = Browser(ws)
                await b.call("Page.enable")
                await b.call("Runtime.enable")
                yield b
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
