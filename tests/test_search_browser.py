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
from browser_cdp import HEADLESS, chromium
from loopback_http import serve
from matplotlib import image as mpimg
from test_search_temporal import two_crawls  # noqa: F401 - module fixture reused
from test_summaries import cli

from raycrawl.commands.search import open_index, run_query
from raycrawl.commands.serve import make_app

TIMEOUT = 90


async def _chrome(tmp_path, url: str, *extra: str) -> str:
    """Run headless Chromium on ``url`` (loopback only) and return its stdout."""
    assert url.startswith("http://127.0.0.1:")
    profile = tmp_path / "chromium-profile"
    proc = await asyncio.create_subprocess_exec(
        chromium(), *HEADLESS, f"--user-data-dir={profile}", *extra, url,
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
    runner, port = await serve(make_app(e1 / "index-scored"))
    yield e1 / "index-scored", f"http://127.0.0.1:{port}"
    await runner.cleanup()


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


async def test_search_page_in_headless_chromium(server, two_crawls, tmp_path):  # noqa: F811
    index_dir, base = server
    _, webs = two_crawls
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
    captures = []
    for li, h in zip(hits, want, strict=True):
        a = re.search(r'<a class="url" href="([^"]+)">([^<]+)</a>', li)
        assert a and html.unescape(a.group(1)) == h.url == html.unescape(a.group(2))
        # the title is the page's own <title> (of its latest version), linked to that capture
        title = re.search(r'<a class="title" href="([^"]+)">([^<]+)</a>', li)
        latest = max(e for e in (0, 1) if h.url in webs[e][0])
        assert html.unescape(title.group(2)) == re.search(rb"<title>(.*?)</title>", webs[latest][0][h.url]).group(1).decode()
        assert title.group(1) == f"/capture/{h.page}/{latest}"
        snippet = re.search(r'<div class="snippet">(.*?)</div>', li, re.S).group(1)
        assert _text(snippet).strip()
        meta = _text(re.search(r'<div class="meta">(.*?)</div>', li, re.S).group(1))
        assert f"score {h.score:.3f}" in meta
        # spam filled (scores are per bare host; the crawled URLs carry a port)
        assert f"PageRank {h.pagerank:.3g}" in meta and f"spam {h.spam:.2f}" in meta and "spam –" not in meta
        versions = _text(re.search(r'<div class="versions">(.*?)</div>', li, re.S).group(1))
        scores = {v.epoch: v.score for v in h.versions}
        for e in (0, 1):
            if h.url in webs[e][0]:
                shown = f"epoch {e}" + (f" ({scores[e]:.2f})" if e in scores else "")
                assert re.search(re.escape(shown) + r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", versions), versions
                captures.append((f"/capture/{h.page}/{e}", webs[e][0][h.url]))
    marked = [m.lower() for li in hits for m in re.findall(r"<mark>([^<]+)</mark>", li)]
    assert "eruption" in marked and "volcano" in marked
    assert f"results 1–{len(want)}" in dom

    # Each capture link opens the archived bytes of that version, from the WARC record.
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for link, body in captures:
            async with session.get(base + link) as resp:
                assert resp.status == 200 and await resp.read() == body, link
                assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
        async with session.get(f"{base}/capture/{len(want) + 999}/0") as resp:
            assert resp.status == 404
    dom = await _chrome(tmp_path, base + captures[0][0], "--dump-dom")  # Chromium renders the capture
    assert re.search(rb"<title>(.*?)</title>", captures[0][1]).group(1).decode() in dom

    # Pagination: 4 per page; "next" leads to hits 5-8 of the same ranking.
    more, _, _ = run_query(open_index(index_dir), query, 12, True)
    dom = await _chrome(tmp_path, f"{base}/?{urlencode({'q': query, 'k': 4, 'or': 1})}", "--dump-dom")
    nxt = html.unescape(re.search(r'<a rel="next" href="([^"]+)">next</a>', dom).group(1))
    dom2 = await _chrome(tmp_path, base + nxt, "--dump-dom")  # the link keeps k and "any word"
    urls2 = [html.unescape(u) for u in re.findall(r'<a class="url" href="([^"]+)">', dom2)]
    assert urls2 == [h.url for h in more[4:8]] and "results 5–8" in dom2
    assert re.search(r'<a rel="prev" href="[^"]+page=1', dom2)

    # The temporal mode is a form with a heading; its submission ranks what changed between epochs.
    dom = await _chrome(tmp_path, url, "--dump-dom")
    assert "<summary>Temporal search" in dom and 'name="t1"' in dom and 'name="t2"' in dom
    dom = await _chrome(tmp_path, f"{base}/?{urlencode({'q': 'eruption', 't1': 0, 't2': 1, 'method': 'pagerank'})}",
                        "--dump-dom")
    assert "Temporal search: what changed between epochs 0 and 1 (pagerank)" in dom
    assert re.findall(r'<li class="hit">', dom)

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
