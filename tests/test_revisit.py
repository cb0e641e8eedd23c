"""Periodic crawling (issue 18): the change-rate estimators, the schedule, the epochs of a crawl
directory, the sieve's once-per-pass requeue, the WARC's not-modified revisits, and a two-pass
crawl of an evolving websim checked against websim's manifest and request logs."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

from raycrawl.policies.revisit import Visit, change_rate, due, mle_estimate, next_interval, regular_estimate


def poisson_visits(lam: float, gaps: list[int], rng: random.Random) -> list[Visit]:
    """Visits at the given gaps of a page changing as a Poisson process of rate ``lam``: an
    interval of length t saw a change with probability 1 − e^{−λt} (an independent simulation)."""
    visits, t = [Visit(0, None)], 0
    for g in gaps:
        t += g
        visits.append(Visit(t, rng.random() < 1 - math.exp(-lam * g)))
    return visits


@pytest.mark.parametrize("lam", [0.05, 0.3, 1.0])
def test_estimators_recover_the_simulated_rate(lam: float) -> None:
    rng = random.Random(7)
    regular = change_rate(poisson_visits(lam, [1] * 4000, rng))
    irregular = change_rate(poisson_visits(lam, [rng.choice([1, 2, 3, 5]) for _ in range(4000)], rng))
    assert regular == pytest.approx(lam, rel=0.12)
    assert irregular == pytest.approx(lam, rel=0.12)


def test_estimator_edge_cases() -> None:
    # Cho & Garcia-Molina's bias-reduced form: finite when every interval saw a change
    assert regular_estimate(4, 4, 1.0) == pytest.approx(-math.log(0.5 / 4.5))
    assert regular_estimate(3, 0, 2.0) == 0.0
    assert mle_estimate([1.0, 2.0], []) is None and mle_estimate([], [1.0]) is None
    assert change_rate([Visit(0, None)]) is None
    assert change_rate([Visit(0, None), Visit(1, None)]) is None  # no comparable answer


def test_schedule_follows_the_change_rate() -> None:
    always = [Visit(k, k > 0 or None) for k in range(4)]
    assert next_interval(always) == 1 and due(always, 4)
    # never changing: the wait doubles per quiet visit up to the maximum
    visits, epoch, gaps = [Visit(0, None)], 0, []
    while epoch < 60:
        gap = next_interval(visits, max_interval=8)
        epoch += gap
        gaps.append(gap)
        visits.append(Visit(epoch, False))
    assert gaps[:5] == [1, 2, 4, 8, 8]
    assert not due([Visit(0, None), Visit(1, False)], 2) and due([Visit(0, None), Visit(1, False)], 3)
    assert not due([], 5)


def rec(url: str, epoch: int, status: int, sha1: str | None = None, revisit_of=None, t: float = 0.0, **kw):
    from raycrawl.storage.link_records import LinkRecord

    return LinkRecord(url, status, "text/html", 1_700_000_000.0 + 100 * epoch + t, ip="127.0.0.1", size=10,
                      epoch=epoch, sha1=sha1, revisit_of=tuple(revisit_of) if revisit_of else None,
                      warc=("a.warc.gz", 100 * epoch + int(t)), **kw)


def write_records(out: Path, records: list) -> None:
    from raycrawl.storage.link_records import LinkRecordWriter

    w = LinkRecordWriter(out)
    w.write_batch(records)
    w.close()


def test_histories_and_snapshots(tmp_path: Path) -> None:
    from raycrawl.storage.crawl_epochs import epochs, histories, snapshots, views
    from raycrawl.storage.warc import warc_date

    a, b = "http://a.test/", "http://b.test/"
    first = rec(a, 0, 200, "sha1:A", etag='"1"', links=["http://a.test/x"])
    records = [
        first,
        rec(a, 1, 304, revisit_of=[a, warc_date(first.time)]),          # unchanged (the server says)
        rec(a, 2, 200, "sha1:B", etag='"2"', links=["http://a.test/y"]),    # changed
        rec(a, 3, 200, "sha1:B", revisit_of=[a, "2026-x"]),                 # identical bytes
        rec(b, 0, 200, "sha1:C"),
        rec(b, 2, 0, error="timeout"),                                       # no answer: no observation
        rec(b, 3, 404, "sha1:D"),                                            # gone: a change
    ]
    write_records(tmp_path, records)
    h = histories(tmp_path)
    assert [(v.epoch, v.changed) for v in h[a].visits] == [(0, None), (1, False), (2, True), (3, False)]
    assert h[a].capture is not None and (h[a].capture.sha1, h[a].capture.etag) == ("sha1:B", None)
    assert [(v.epoch, v.changed) for v in h[b].visits] == [(0, None), (3, True)]
    assert h[b].capture is None  # nothing a conditional GET could revalidate
    assert epochs(tmp_path) == [0, 1, 2, 3] and [(v.dir, v.epoch) for v in views([tmp_path])] == [(tmp_path, k) for k in range(4)]
    snaps = snapshots(tmp_path)
    assert snaps[1][a] == first  # the 304 stands for the capture it revalidated
    assert snaps[2][a].links == ["http://a.test/y"] and snaps[3][a] == snaps[2][a]
    assert snaps[2][b] == snaps[0][b] and snaps[3][b].status == 404


def test_sieve_requeues_once_per_pass(tmp_path: Path) -> None:
    from raycrawl.actors.frontier.sieve import Sieve

    sieve = Sieve(tmp_path, batch_size=10)
    urls = [f"http://h.test/p{i}" for i in range(5)]
    sieve.enqueue(urls)
    sieve.flush()
    end = sieve.end
    assert sieve.store.requeue(urls[:2], [0, 0], tag=1)
    assert not sieve.store.requeue(urls[:2], [0, 0], tag=1)  # a second run of the same pass
    sieve.close()
    sieve = Sieve(tmp_path, batch_size=10)  # reopened (a restart): the requeue was committed
    got, off = sieve.read(end, 10)
    assert got == urls[:2]
    sieve.enqueue(urls[:1] + ["http://h.test/new"])  # a link to a requeued URL is still a repeat
    sieve.flush()
    assert sieve.read(off, 10)[0] == ["http://h.test/new"]
    assert not sieve.store.requeue(urls, [0] * 5, tag=1) and sieve.store.requeue(urls[4:], [0], tag=2)
    sieve.close()


def test_warc_not_modified_revisit(tmp_path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator

    from raycrawl.exchange import FetchResult
    from raycrawl.storage.warc import NOT_MODIFIED_PROFILE, WarcStore

    def answer(status: int, body: bytes) -> FetchResult:
        return FetchResult(url="http://a.test/", ip="127.0.0.1", status=status, body=body, ctype="text/html",
                           started=1.0, ended=2.0, status_line=f"HTTP/1.1 {status} X", raw_headers=[])

    store = WarcStore(tmp_path, "t")
    store.write(answer(200, b"<p>v1</p>"))
    with pytest.raises(ValueError):  # a 200 is no not-modified answer
        store.write(answer(200, b"<p>v2</p>"), ("http://a.test/", "1970-01-01T00:00:02.000000Z", None))
    store.write(answer(304, b""), ("http://a.test/", "1970-01-01T00:00:02.000000Z", None))
    store.close()
    with open(next(tmp_path.glob("*.warc.gz")), "rb") as f:
        recs = [(r.rec_type, r.rec_headers) for r in ArchiveIterator(f, check_digests=True)]
    [(_, rv)] = [r for r in recs if r[0] == "revisit"]
    assert rv.get_header("WARC-Profile") == NOT_MODIFIED_PROFILE
    assert rv.get_header("WARC-Payload-Digest") is None
    assert rv.get_header("WARC-Refers-To-Date") == "1970-01-01T00:00:02.000000Z"


@pytest.mark.slow
def test_two_pass_periodic_crawl_of_an_evolving_web(tmp_path: Path) -> None:
    """Pass 0 crawls epoch 0; websim moves to epoch 1 (same port, same URLs); ``crawl --revisit``
    revisits every page with a conditional GET. Checked against websim: each pass polite and
    without a repeated request, every page known after pass 0 asked again, a 304 exactly for the
    pages the manifest says did not change (and their revisit record refers to a capture of the
    bytes websim serves), a full new response for those that changed; the index and the temporal
    spam features read the two passes as two epochs."""
    from archive_check import check_archive
    from test_crawl import run

    from raycrawl.redis_server import free_port
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.urls import canonicalize
    from raycrawl.websim import Websim

    out, port = tmp_path / "crawl", free_port()
    params = {"hosts": 12, "ips": 4, "seed": 3, "pages_per_host_mean": 8, "change_rates": True, "clean": True}
    pages_after: dict[int, set[str]] = {}
    for epoch in (0, 1):
        with Websim(**params, epoch=epoch, port=port, out_dir=tmp_path / f"web{epoch}") as web:
            extra = ["--seeds", str(web.seeds_file)] if epoch == 0 else ["--revisit"]
            proc = run([sys.executable, "-m", "raycrawl", "crawl", "--out", str(out), "--resolve", str(web.hosts_file),
                        "--allow-networks", "127.0.0.0/8", "--host-delay", "0.05", "--ip-delay", "0.01", *extra])
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert web.audit(0.05, 0.01).ok  # polite, and no URL asked twice within the pass
            check_archive(out / "warc", web, {**params, "epoch": epoch})
            requests = {(r.host, r.target): r.status for r in web.requests()}
            manifest = web.manifest
        records = [r for r in iter_link_records(out) if r.epoch == epoch]
        pages_after[epoch] = {r.url for r in iter_link_records(out) if r.status == 200}
        assert records and all(r.epoch == epoch for r in records)
    # every page fetched in pass 0 was asked again in pass 1, conditionally where it had validators
    asked = {canonicalize(f"http://{h}{t}") for h, t in requests}
    assert pages_after[0] <= asked
    by_url = {r.url: r for r in iter_link_records(out) if r.epoch == 1}
    changed = {u for u in pages_after[0] if 1 in manifest.pages[u]["changed"]}
    html = {u for u in pages_after[0] if manifest.pages[u]["kind"] == "html"}
    assert changed and html - changed
    gone = {u for u in html if manifest.pages[u]["removed_in"] == 1}
    for url in html:
        expect = 404 if url in gone else 200 if url in changed else 304
        assert by_url[url].status == expect, (url, by_url[url].status, manifest.pages[url]["changed"])
        assert (by_url[url].revisit_of is not None) == (expect == 304)
    report = json.loads((out / "report.json").read_text())
    assert report["pass"] == 1 and report["revisits"]["not-modified"] == len(html - changed - gone)
    # the two passes are two epochs for the index and the temporal spam features
    proc = run([sys.executable, "-m", "raycrawl", "index", "build", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads((out / "index" / "stats.json").read_text())
    assert stats["crawls"] == [f"{out.resolve()}@0", f"{out.resolve()}@1"]
    word = manifest.meta["popular_terms"][0]
    proc = run([sys.executable, "-m", "raycrawl", "search", str(out), word, "--temporal", "0", "1", "--json"])
    assert proc.returncode == 0 and json.loads(proc.stdout)["results"], proc.stderr[-2000:]
    proc = run([sys.executable, "-m", "raycrawl", "spam", "temporal", str(out), "--fingerprints", "10"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    # both passes replay through pywb; the 304 revisits are left out of the index, not replayed as 304s
    from pywb_replay import captures, check_replay, pywb

    proc = run([sys.executable, "-m", "raycrawl", "warc", "index", str(out), "--pywb",
                str(tmp_path / "pywb" / "collections" / "passes")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    replayable, _ = captures(out / "warc")
    lines = (tmp_path / "pywb" / "collections" / "passes" / "indexes" / "crawl.cdxj").read_text().splitlines()
    pages = [line for line in lines if not line.split(" ", 1)[0].endswith("/robots.txt")]  # robots.txt: no link record
    assert len(pages) == len([r for r in iter_link_records(out) if r.warc and r.status != 304]) > 0
    assert not any('"status": "304"' in line for line in lines)
    with pywb(tmp_path / "pywb") as pywb_port:
        check_replay(pywb_port, "passes", replayable)
