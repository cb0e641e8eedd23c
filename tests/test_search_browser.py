"""``raycrawl serve``'s search page rendered by real headless Chromium (issue 10).

The aiohttp server runs in the test's event loop; Chromium runs as an asyncio subprocess against
127.0.0.1 with a private profile, dumps the rendered DOM and takes a screenshot. Chromium is the
Debian ``chromium`` package, which ``make setup`` installs when it is missing; without it this test
fails (it is never skipped).
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import shutil
import signal
from urllib.parse import urlencode

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from matplotlib import image as mpimg
from test_search_temporal import two_crawls  # noqa: F401 - module fixture reused
from test_summaries import cli

from raycrawl.commands.search import open_index, run_query
from raycrawl.commands.serve import make_app

TIMEOUT = 90


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("no chromium on PATH: `make setup` installs Debian's chromium package "
                "(apt-get install --no-install-recommends chromium)")


async def _chrome(tmp_path, url: str, *extra: str) -> str:
    """Run headless Chromium on ``url`` (loopback only) and return its stdout."""
    assert url.startswith("http://127.0.0.1:")
    profile = tmp_path / "chromium-profile"
    proc = await asyncio.create_subprocess_exec(
        _chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
        "--disable-background-networking", "--disable-component-update", "--mute-audio",
        f"--user-data-dir={profile}", *extra, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        pytest.fail(f"chromium did not finish within {TIMEOUT}s on {url}")
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}"
    return out.decode()


@pytest.fixture
async def server(two_crawls, capsys):  # noqa: F811
    """The search page over epoch 1 indexed with the real PageRank (``raycrawl graph build`` +
    ``raycrawl rank``) and per-host spam scores in ``DIR/spam/scores.parquet`` (written here: the
    5-host crawl is too small to train the spam ensemble)."""
    root, _ = two_crawls
    e1 = root / "e1"
    assert cli(capsys, "graph", "build", e1).returncode == 0
    assert cli(capsys, "rank", e1, "--no-png").returncode == 0
    (e1 / "spam").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist([{"host": f"h{i}.test", "score": 0.1 + 0.2 * i} for i in range(5)]),
                   e1 / "spam" / "scores.parquet")
    assert cli(capsys, "index", "build", e1, "--crawl", root / "e0", "--out", e1 / "index-scored").returncode == 0
    runner = web.AppRunner(make_app(e1 / "index-scored"))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield e1 / "index-scored", f"http://127.0.0.1:{port}"
    await runner.cleanup()


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


async def test_search_page_in_headless_chromium(server, tmp_path):  # noqa: F811
    index_dir, base = server
    query = "eruption volcano"
    want, _, _ = run_query(open_index(index_dir), query, 10)
    assert want and all(h.pagerank is not None and h.spam is not None for h in want)
    url = f"{base}/?{urlencode({'q': query})}"

    dom = await _chrome(tmp_path, url, "--dump-dom")
    # The form submits by GET to / with the query words in q (so the URL above is what it produces).
    assert re.search(r'<form method="get" action="/">', dom)
    assert f'name="q" value="{query}"' in dom
    hits = re.findall(r'<li class="hit">(.*?)</li>', dom, re.S)
    assert len(hits) == len(want), dom[:3000]
    for li, h in zip(hits, want, strict=True):
        a = re.search(r'<a class="url" href="([^"]+)">([^<]+)</a>', li)
        assert a and html.unescape(a.group(1)) == h.url == html.unescape(a.group(2))
        snippet = re.search(r'<div class="snippet">(.*?)</div>', li, re.S).group(1)
        assert _text(snippet).strip()
        meta = _text(re.search(r'<div class="meta">(.*?)</div>', li, re.S).group(1))
        assert f"score {h.score:.3f}" in meta
        assert f"PageRank {h.pagerank:.3g}" in meta and f"spam {h.spam:.2f}" in meta
        versions = _text(re.search(r'<div class="versions">(.*?)</div>', li, re.S).group(1))
        assert versions == "versions: " + ", ".join(f"epoch {v.epoch} ({v.score:.2f})" for v in h.versions)
    marked = [m.lower() for li in hits for m in re.findall(r"<mark>([^<]+)</mark>", li)]
    assert "eruption" in marked and "volcano" in marked
    assert f"{len(want)} result(s)" in dom

    # Bad input: the clear one-line error, the query echoed escaped (no script element in the DOM).
    bad = f"{base}/?{urlencode({'q': '<script>x</script> word', 'version': 'abc'})}"
    dom = await _chrome(tmp_path, bad, "--dump-dom")
    assert re.search(r'<p class="error">version must be an integer</p>', dom), dom[:3000]
    assert "<script>x" not in dom and '<li class="hit">' not in dom

    # A screenshot of the result page: a real PNG of the window's size, not blank.
    png = tmp_path / "results.png"
    await _chrome(tmp_path, url, f"--screenshot={png}", "--window-size=1000,700", "--hide-scrollbars")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, len(data)
    img = mpimg.imread(png)
    assert img.shape[:2] == (700, 1000)
    rgb = img[..., :3]
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20  # text, links, marks: not one colour
    dark = (rgb.mean(axis=2) < 0.5).mean()
    assert 0.005 < dark < 0.5, dark  # mostly white page with text on it
    if out := os.environ.get("RAYCRAWL_SCREENSHOT"):
        shutil.copy(png, out)
