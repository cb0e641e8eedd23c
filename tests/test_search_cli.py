"""``raycrawl index build`` / ``raycrawl search`` on crawl directories holding two epochs of websim
pages (real WARC files and link records written by the crawler's own writers; the pages are the
websim renderer's bytes), checked against a brute-force scan of the renderer's words; user errors."""

from __future__ import annotations

import json
import re
import time

import pytest
from test_summaries import cli

from raycrawl.exchange import FetchResult
from raycrawl.storage.link_records import LinkRecordWriter
from raycrawl.storage.warc import WarcStore
from raycrawl.tasks.query import BruteForce
from raycrawl.text import stems
from raycrawl.websim.model import WebModel
from raycrawl.websim.render import Renderer


def _title(body: bytes) -> str:
    m = re.search(rb"<title>(.*?)</title>", body)
    return m.group(1).decode() if m else ""


def _write_crawl(crawl_dir, pages: dict[str, bytes], links: dict[str, list[str]] | None = None) -> None:
    store = WarcStore(crawl_dir / "warc", "agent0")
    writer = LinkRecordWriter(crawl_dir, "agent0")
    recs = []
    for url, body in pages.items():
        now = time.time()
        fr = FetchResult(url=url, ip="127.0.0.1", status=200, body=body, ctype="text/html", started=now, ended=now,
                         status_line="HTTP/1.1 200 OK", http_version="1.1",
                         raw_headers=[(b"Content-Type", b"text/html; charset=utf-8"),
                                      (b"Content-Length", str(len(body)).encode())],
                         headers={"content-type": "text/html; charset=utf-8", "content-length": str(len(body))})
        name, off = store.write(fr)
        recs.append({"url": url, "status": 200, "ctype": "text/html", "time": now, "ip": "127.0.0.1",
                     "size": len(body), "digest": None, "dup_of": None, "dup_kind": None,
                     "links": (links or {}).get(url, []),
                     "redirect": None, "error": None, "title": _title(body), "warc": [name, off], "epoch": 0})
    # A non-HTML record must not be indexed.
    recs.append({"url": "http://x.test/a.png", "status": 200, "ctype": "image/png", "time": 0.0, "ip": "",
                 "size": 0, "digest": None, "dup_of": None, "dup_kind": None, "links": [], "redirect": None,
                 "error": None, "title": "", "warc": None, "epoch": 0})
    writer.write_maps(recs)
    writer.close()
    store.close()


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory):
    root = tmp_path_factory.mktemp("crawls")
    truth = {}
    for epoch in (0, 1):
        model = WebModel.generate(hosts=10, ips=2, seed=3, epoch=epoch)
        r = Renderer(model, port=80)
        pages = {}
        for host in model.hosts:
            for page in host.pages.values():
                if page.kind == "html" and page.removed_in is None and not host.trap and not host.fault:
                    url = r.url(host.name, page.path)
                    pages[url] = r.html(host, page).encode()
                    truth.setdefault(url, {})[epoch] = stems(r.words(host, page))
        _write_crawl(root / f"e{epoch}", pages)
    return root, truth


def test_build_and_search_match_brute_force(two_epochs, capsys):
    root, truth = two_epochs
    r = cli(capsys, "index", "build", root / "e1", "--crawl", root / "e0", "--policy", "global")
    assert r.returncode == 0, r.stderr
    stats = json.loads((root / "e1" / "index" / "stats.json").read_text())
    assert stats["pages"] == len(truth)
    assert stats["versions"] == sum(len(v) for v in truth.values())
    assert stats["positions_total"] == sum(len(t) for v in truth.values() for t in v.values())
    assert stats["positions"] < 0.75 * stats["positions_total"]  # epoch 1 mostly repeats epoch 0
    brute = BruteForce([(u, sorted(truth[u].items())) for u in sorted(truth)])
    urls = sorted(truth)
    # Queries from words of actual pages: a page's rare and common terms.
    some = truth[urls[len(urls) // 2]][0]
    queries = [some[:1], some[3:5], [some[0], some[-1]]]
    for q in queries:
        for extra, mode, epoch in (([], "and", None), (["--or"], "or", None), (["--version", "1"], "and", 1)):
            r = cli(capsys, "search", root / "e1", " ".join(q), "--json", "-k", "20", *extra)
            assert r.returncode == 0, r.stderr
            got = json.loads(r.stdout)["results"]
            want = brute.search(q, k=20, mode=mode, epoch=epoch)
            assert [g["url"] for g in got] == [urls[d] for d, _ in want]
            assert [g["score"] for g in got] == pytest.approx([s for _, s in want])
    r = cli(capsys, "search", root / "e1", " ".join(some[:2]))
    assert r.returncode == 0 and "versions: epoch" in r.stdout


def test_user_errors_are_one_line(two_epochs, tmp_path, capsys):
    root, _ = two_epochs
    cases = [
        (["index", "build", tmp_path / "nope"], "no such crawl directory"),
        (["index", "build", tmp_path], "not a crawl output directory"),
        (["search", tmp_path, "cat"], "no index"),
        (["index", "stats", tmp_path], "no index"),
    ]
    (root / "e0" / "index").mkdir(exist_ok=True)
    (root / "e0" / "index" / "query.bin").write_bytes(b"\x00garbage")
    cases.append((["search", root / "e0", "cat"], "unreadable index"))
    if not (root / "e1" / "index").exists():
        assert cli(capsys, "index", "build", root / "e1").returncode == 0
    cases += [(["search", root / "e1", "the and of"], "no searchable words"),
              (["search", root / "e1", "word", "--version", "7"], "epochs")]
    for args, msg in cases:
        r = cli(capsys, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert msg in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
