"""Two epochs of websim really crawled (``raycrawl crawl`` over loopback), indexed with
``raycrawl index build E1 --crawl E0`` and searched; the ground truth is websim's renderer."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest
from test_summaries import cli
from test_summaries_crawl import run

from raycrawl.storage.link_records import iter_link_records
from raycrawl.tasks.query import BruteForce
from raycrawl.text import stems, terms

pytestmark = pytest.mark.slow  # two real crawls (Ray start-up each)


def browser_text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def test_two_crawled_epochs(tmp_path, capsys):
    from raycrawl.websim import Websim
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    params = {"hosts": 3, "ips": 1, "seed": 8}
    # URLs carry the port: both epochs must be served on the same one to be versions of one page.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port_fixed = sock.getsockname()[1]
    truth: dict[str, dict[int, list[str]]] = {}
    for epoch in (0, 1):
        crawl = tmp_path / f"e{epoch}"
        with Websim(**params, epoch=epoch, port=port_fixed, out_dir=tmp_path / f"websim{epoch}") as web:
            ip, port = web.dns_address
            seeds = tmp_path / f"seeds{epoch}.txt"
            seeds.write_text("".join(p["url"] + "\n" for p in web.manifest.html_pages()))
            r = run(["crawl", "--seeds", seeds, "--out", crawl, "--dns-server", f"{ip}:{port}",
                     "--allow-networks", "127.0.0.0/8", "--host-delay", "0.01", "--ip-delay", "0.005",
                     "--max-pages", "80", "--read-timeout", "3", "--max-retries", "1", "--retry-backoff", "0.5",
                     "--max-crawl-delay", "0.05"])  # (robots Crawl-delays of 1 s are not the point here)
            assert r.returncode == 0, r.stderr[-3000:]
            served = web.port
        model = WebModel.generate(**params, epoch=epoch)
        renderer = Renderer(model, served)
        for rec in iter_link_records(crawl):
            if rec.status != 200 or rec.ctype != "text/html" or rec.error:
                continue
            if rec.dup_of:  # a crawl-time duplicate: its text is indexed once, as its representative's
                continue
            parts = urlsplit(rec.url)
            page = model.page(parts.hostname, parts.path + (f"?{parts.query}" if parts.query else ""))
            assert page is not None, rec.url
            host = model.by_name[parts.hostname]
            # HTML pages: the renderer's words; other bodies served as text/html (random bytes, no
            # charset): their text as a browser decodes them, UTF-8 when valid, else windows-1252.
            truth.setdefault(rec.url, {})[epoch] = (stems(renderer.words(host, page)) if page.kind == "html"
                                                       else terms(browser_text(renderer.response(host, page).body)))
    assert sum(len(v) > 1 for v in truth.values()) >= 10  # many pages crawled in both epochs
    # Both crawls in ONE pywb collection: their WARC names do not clash, and each capture of a page
    # crawled twice replays as that crawl stored it.
    from pywb_replay import captures, check_replay, pywb

    coll = tmp_path / "pywb" / "collections" / "both"
    expected: dict = {}
    for epoch in (0, 1):
        assert cli(capsys, "warc", "index", tmp_path / f"e{epoch}", "--pywb", coll).returncode == 0
        expected.update(captures(tmp_path / f"e{epoch}" / "warc")[0])
    assert len(list((coll / "archive").iterdir())) == sum(
        len(list((tmp_path / f"e{e}" / "warc").glob("*.warc.gz"))) for e in (0, 1))
    assert sorted(p.name for p in (coll / "indexes").iterdir()) == ["e0.cdxj", "e1.cdxj"]
    twice = {url for url, _ in expected if sum(u == url for u, _ in expected) == 2}
    assert len(twice) >= 10
    with pywb(tmp_path / "pywb") as pywb_port:
        check_replay(pywb_port, "both", expected)
    r = cli(capsys, "index", "build", tmp_path / "e1", "--crawl", tmp_path / "e0")
    assert r.returncode == 0, r.stderr
    stats = json.loads((tmp_path / "e1" / "index" / "stats.json").read_text())
    assert stats["pages"] == len(truth) and stats["versions"] == sum(len(v) for v in truth.values())
    assert stats["positions_total"] == sum(len(t) for v in truth.values() for t in v.values())
    urls = sorted(truth)
    brute = BruteForce([(u, sorted(truth[u].items())) for u in urls])
    # Query words from an epoch-0 version: which pages a budgeted crawl reached in each epoch
    # depends on its order, so the sample is the first URL that has one (urls[3] sometimes had not).
    sample = next(truth[u][0] for u in urls[3:] + urls[:3] if 0 in truth[u] and len(truth[u][0]) > 5)
    for q in ([sample[0], sample[5]], [sample[-1]]):
        for extra, epoch in (([], None), (["--version", "0"], 0)):
            r = cli(capsys, "search", tmp_path / "e1", " ".join(q), "--json", "-k", "15", *extra)
            assert r.returncode == 0, r.stderr
            got = json.loads(r.stdout)["results"]
            assert [g["url"] for g in got] == [urls[d] for d, _ in brute.search(q, 15, epoch=epoch)]

    # The same two real crawls through `raycrawl spam temporal` (link features; content needs
    # `spam features` first): the growth and death rates equal set arithmetic on the link records.
    import math

    import pyarrow.parquet as pq

    r = cli(capsys, "spam", "temporal", tmp_path / "e0", tmp_path / "e1", "--no-content", "--fingerprints", "16")
    assert r.returncode == 0, r.stderr
    rows = {row["host"]: row for row in pq.read_table(tmp_path / "e1" / "spam" / "temporal.parquet").to_pylist()}
    arcs, crawled = [], []
    for epoch in (0, 1):
        recs = [rec for rec in iter_link_records(tmp_path / f"e{epoch}") if rec.url]
        hosts = {urlsplit(rec.url).hostname for rec in recs}
        crawled.append(hosts)
        arcs.append({(urlsplit(rec.url).hostname, urlsplit(v).hostname) for rec in recs
                     for v in rec.links or () if urlsplit(v).hostname in hosts - {urlsplit(rec.url).hostname}})
    assert set(rows) == crawled[0] | crawled[1]
    defined = 0
    for host in crawled[0] & crawled[1]:
        for name, side in (("O", 0), ("I", 1)):
            before = {a[1 - side] for a in arcs[0] if a[side] == host}
            after = {a[1 - side] for a in arcs[1] if a[side] == host}
            death = (len(before) - len(before & after)) / len(before) if before else math.nan
            growth = (len(after) - len(before & after)) / len(before) if before else math.nan
            defined += bool(before)
            for got, want in ((rows[host][f"{name}DR"], death), (rows[host][f"{name}GR"], growth)):
                assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want), (host, name)
    assert defined >= 2  # hosts linked across the epochs, so the rates are numbers, not NaN
