"""``raycrawl serve``: the search page and its JSON API over real HTTP on loopback."""

from __future__ import annotations

import aiohttp
import pytest
from loopback_http import serve
from test_search_temporal import two_crawls  # noqa: F401 - module fixture reused
from test_summaries import cli

from raycrawl.commands.search import open_index, run_query
from raycrawl.commands.serve import make_app


@pytest.fixture
async def server(two_crawls, capsys):  # noqa: F811
    root, _ = two_crawls
    if not (root / "e1" / "index" / "query.bin").exists():
        assert cli(capsys, "index", "build", root / "e1", "--crawl", root / "e0").returncode == 0
    runner, port = await serve(make_app(root / "e1"))
    yield root, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_only_its_own_names_are_answered(server):
    """DNS rebinding (a page of another name resolving to 127.0.0.1) reads nothing: 403."""
    _, base = server
    port = base.rsplit(":", 1)[1]
    async with aiohttp.ClientSession() as s:
        for path in ("/api?q=eruption", "/?q=eruption", "/capture/0/0"):
            async with s.get(base + path, headers={"Host": f"attacker.example:{port}"}) as r:
                assert r.status == 403, (path, r.status)
        async with s.get(f"{base}/api?q=eruption", headers={"Host": f"localhost:{port}"}) as r:
            assert r.status == 200


async def test_page_and_api(server):
    root, base = server
    index = open_index(root / "e1")
    want, _, _ = run_query(index, "eruption volcano", 10)
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/api", params={"q": "eruption volcano"}) as r:
            assert r.status == 200
            data = await r.json()
        assert [x["url"] for x in data["results"]] == [h.url for h in want]
        assert all(x["snippet"] for x in data["results"])
        # The snippet window is cut around a query word (the stemmed term is a prefix of the word).
        assert sum("eruption" in x["snippet"] for x in data["results"]) >= len(want) // 2
        assert data["results"][0]["versions"] == [{"epoch": v.epoch, "score": v.score} for v in want[0].versions]
        async with s.get(base, params={"q": "eruption volcano"}) as r:
            page = await r.text()
        assert r.status == 200 and all(h.url in page for h in want) and "captures: <a class=\"capture\" href=\"/capture/" in page
        assert "<mark>eruption</mark>" in page
        async with s.get(base, params={"q": "eruption", "t1": "0", "t2": "1"}) as r:
            assert r.status == 200 and "change" in await r.text()
        # Bad input: a clear message, the query echoed escaped, never a traceback.
        async with s.get(base, params={"q": "<script>x</script> word", "version": "abc"}) as r:
            text = await r.text()
            assert r.status == 400 and "version must be an integer" in text
            assert "<script>x" not in text and "&lt;script&gt;" in text
        async with s.get(f"{base}/api", params={"q": "eruption", "version": "9"}) as r:
            assert r.status == 400 and "epochs" in (await r.json())["error"]
