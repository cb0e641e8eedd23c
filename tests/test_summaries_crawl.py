"""Round trip on a really crawled websim collection: websim serves, ``raycrawl crawl`` fetches
over loopback, ``raycrawl summaries build`` reads the WARCs; every page's summary must equal
the words websim rendered (its renderer is the ground truth), and the simulation runs on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from raycrawl import text
from raycrawl.storage.summaries import SummaryArchive

ROOT = Path(__file__).parents[1]
pytestmark = pytest.mark.slow  # a real crawl: Ray start-up plus a few hundred polite fetches


def run(args, timeout=420):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "raycrawl", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_crawled_websim_round_trip(tmp_path, capsys):
    from raycrawl.storage.crawl_graph import node_map
    from raycrawl.websim import Websim
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    crawl = tmp_path / "crawl"
    params = {"hosts": 8, "ips": 2, "seed": 5}
    with Websim(**params, out_dir=tmp_path / "websim") as web:
        ip, port = web.dns_address
        # Every HTML page is a seed, so this test does not depend on how far link following gets.
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(p["url"] + "\n" for p in web.manifest.html_pages()))
        r = run(["crawl", "--seeds", seeds, "--out", crawl, "--dns-server", f"{ip}:{port}",
                 "--allow-networks", "127.0.0.0/8", "--host-delay", "0.02", "--ip-delay", "0.005",
                 "--max-pages", "300", "--read-timeout", "3", "--max-retries", "1", "--retry-backoff", "0.5",
                     "--max-crawl-delay", "0.05"])  # (robots Crawl-delays of 1 s are not the point here)
        assert r.returncode == 0, r.stderr[-3000:]
        served_port = web.port
    r = run(["summaries", "build", crawl, "--min-df", "1"])
    assert r.returncode == 0, r.stderr[-3000:]
    archive = SummaryArchive.open(crawl)
    id_of, url_of, n, _ = node_map(crawl)
    assert archive.num_nodes == n
    model = WebModel.generate(**params)
    renderer = Renderer(model, served_port)
    checked = 0
    from raycrawl.storage.link_records import iter_link_records

    for rec in iter_link_records(crawl):
        if rec.status != 200 or rec.ctype != "text/html" or rec.dup_kind:
            continue
        parts = urlsplit(rec.url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        page = model.page(parts.hostname, path)
        if page is None or page.kind != "html":
            continue
        words = renderer.words(model.by_name[parts.hostname], page)
        node = id_of(rec.url)
        s = archive.get(node)
        assert s is not None, rec.url
        assert s.length == len(words)
        assert archive.get_terms(node) == dict(Counter(text.stems(words))), rec.url
        checked += 1
    assert checked >= 60, checked
    # The crawl fed the summary writer as it went: building from its spill gives the same archive.
    from_warc = {v: archive.get_terms(v) for v in range(n)}
    r = run(["summaries", "build", crawl, "--min-df", "1", "--from-spill"])
    assert r.returncode == 0, r.stderr[-3000:]
    spilled = SummaryArchive.open(crawl)
    assert {v: spilled.get_terms(v) for v in range(n)} == from_warc
    truth = tmp_path / "websim" / "manifest.jsonl.gz"
    topic = Counter(model.vocab.topic_name(h.topic) for h in model.hosts).most_common(1)[0][0]
    from test_summaries import cli

    r = cli(capsys, "simulate", crawl, "--relevance", f"topic:{topic}", "--truth", truth, "--budget", n,
            "--train", 50)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads((crawl / "simulate" / "harvest.json").read_text())
    assert out["policies"]["bfs"]["fetched"] == out["policies"]["best-first"]["fetched"] > 0
