"""Archive of summaries: exact round trips, the paper's coding rules, sub-archives, bad archives."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import dsi_bitstream
import numpy as np
import pytest

from raycrawl import text
from raycrawl.storage.summaries import (
    ArchiveError,
    SubArchive,
    SummaryArchive,
    SummaryBitWriter,
    build_archive,
    nu,
    nu_inverse,
)
from raycrawl.storage.summary_spill import SpillWriter, iter_spill, spill_paths


def random_collection(seed: int, nodes: int, n_terms: int = 5000, missing_rate: float = 0.1):
    """Summaries with Zipf-distributed term ids and counts, plus a random set of missing nodes."""
    rng = np.random.default_rng(seed)
    docs = {}
    for node in range(nodes):
        if rng.random() < missing_rate:
            continue
        s = int(rng.integers(0, 120))
        t = np.unique(np.minimum(rng.zipf(1.3, s) - 1, n_terms - 1)).astype(np.int64)
        c = np.minimum(rng.zipf(1.8, len(t)), 10**6).astype(np.int64)
        length = int(c.sum() + rng.integers(0, 500))
        docs[node] = (length, t, c)
    return docs


def write_collection(base: Path, nodes: int, docs: dict, codes=None, n_terms: int = 5000):
    w = SummaryBitWriter(base, nodes, codes)
    for node in sorted(docs):
        w.add(node, *docs[node])
    terms = [f"t{i}" for i in range(n_terms)]
    return w.close(terms, range(n_terms, 0, -1), range(2 * n_terms, 0, -2), min_df=1)


def assert_same(archive: SummaryArchive, docs: dict, nodes: int):
    for node in range(nodes):
        s = archive.get(node)
        if node not in docs:
            assert s is None and node not in archive
            continue
        length, t, c = docs[node]
        assert s.length == length and np.array_equal(s.term_ids, t) and np.array_equal(s.counts, c)
    d = archive.decode_all()
    assert d.doc_ids.tolist() == sorted(docs)
    for i, node in enumerate(d.doc_ids.tolist()):
        a, b = d.offsets[i], d.offsets[i + 1]
        assert d.lengths[i] == docs[node][0]
        assert np.array_equal(d.term_ids[a:b], docs[node][1]) and np.array_equal(d.counts[a:b], docs[node][2])


def test_nu_is_a_bijection():
    xs = list(range(-1000, 1001))
    ys = [nu(x) for x in xs]
    assert sorted(ys) == list(range(2001))
    assert [nu_inverse(y) for y in ys] == xs


@pytest.mark.parametrize("seed", [1, 2])
def test_random_round_trip_default_codes(tmp_path, seed):
    nodes = 1500
    docs = random_collection(seed, nodes)
    props = write_collection(tmp_path / "s", nodes, docs)
    archive = SummaryArchive.open(tmp_path / "s")
    assert props["documents"] == len(docs) and len(archive.missing) == nodes - len(docs)
    assert_same(archive, docs, nodes)
    assert [s.doc_id for s in archive] == sorted(docs)


def test_round_trip_other_codes(tmp_path):
    nodes = 700
    docs = random_collection(7, nodes, missing_rate=0.0)
    codes = {"length": "gamma", "size": "delta", "term_gap": "zeta3", "count_gap": "zeta1"}
    write_collection(tmp_path / "s", nodes, docs, codes)
    assert_same(SummaryArchive.open(tmp_path / "s"), docs, nodes)


def test_stream_follows_the_paper_layout(tmp_path):
    """Read the bit stream back with dsi-bitstream's own reader, applying the paper's rules."""
    nodes = 300
    docs = random_collection(3, nodes)
    write_collection(tmp_path / "s", nodes, docs)
    r = dsi_bitstream.BitReaderBigEndian(str(tmp_path / "s.bits"))
    for node in sorted(docs):
        length, t, c = docs[node]
        assert r.read_delta() == length
        s = r.read_zeta(k=3)
        assert s == len(t)
        terms, prev = [], -1
        for _ in range(s):
            prev += r.read_zeta(k=2) + 1
            terms.append(prev)
        counts = [0] * s
        for i in range(s - 1, -1, -1):  # least frequent term's count first
            g = r.read_gamma()
            counts[i] = g + 1 if i == s - 1 else counts[i + 1] + nu_inverse(g)
        assert terms == t.tolist() and counts == c.tolist()


def test_pointer_and_missing_sets(tmp_path):
    nodes = 5000
    docs = random_collection(5, nodes, missing_rate=0.03)
    write_collection(tmp_path / "s", nodes, docs)
    a = SummaryArchive.open(tmp_path / "s")
    st = a.stats()
    # Elias–Fano bound: 2 + ⌈log2(total bits / n)⌉ bits per pointer.
    assert st["pointer_bits_per_summary"] <= 2 + np.ceil(np.log2(a.total_bits / len(docs))) + 0.01
    missing = sorted(set(range(nodes)) - set(docs))
    assert a.missing.to_array().tolist() == missing
    assert [a.ordinal(n) for n in sorted(docs)[:50]] == list(range(50))


def _record_collection(seed: int, n_docs: int):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(400)]
    recs = []
    for d in range(n_docs):
        toks = [words[min(int(z) - 1, 399)] for z in rng.zipf(1.4, int(rng.integers(0, 200)))]
        recs.append({"url": f"http://h{d % 7}.test/p{d}", "length": len(toks) + 3, "terms": dict(Counter(toks))})
    return recs


def test_build_two_passes_min_df_and_original_terms(tmp_path):
    recs = _record_collection(11, 600)
    urls = sorted(r["url"] for r in recs) + ["http://h0.test/never-fetched"]
    urls.sort()
    index = {u: i for i, u in enumerate(urls)}
    spill = SpillWriter(tmp_path / "spill", "agent0", batch=50)
    spill2 = SpillWriter(tmp_path / "spill", "agent1", batch=50)
    for i, r in enumerate(recs):  # two agents' spills, merged by the build
        (spill if i % 2 else spill2).add(r["url"], r["length"], r["terms"])
    spill.close()
    spill2.close()
    paths = spill_paths(tmp_path / "spill")
    assert len(paths) == 2 and sum(1 for _ in iter_spill(paths)) == len(recs)
    props = build_archive(iter_spill(paths), tmp_path / "out" / "summaries", index.get, len(urls), min_df=5,
                          records_again=lambda: iter_spill(paths))
    a = SummaryArchive.open(tmp_path / "out")
    df = Counter(t for r in recs for t in r["terms"])
    cf = Counter()
    for r in recs:
        cf.update(r["terms"])
    kept = {t for t, d in df.items() if d >= 5}
    assert set(a.terms) == kept and props["terms"] == len(kept)
    # Frequency-rank order: term 0 most frequent.
    assert [cf[t] for t in a.terms] == sorted((cf[t] for t in kept), reverse=True)
    for r in recs:
        node = index[r["url"]]
        assert a.get_terms(node) == {t: c for t, c in r["terms"].items() if t in kept}
        assert a.get(node).length == r["length"]
    assert a.get(index["http://h0.test/never-fetched"]) is None
    assert a.term_id(a.terms[3]) == 3 and a.term_id("no-such-term") is None


def test_sub_archive(tmp_path):
    nodes = 800
    docs = random_collection(9, nodes)
    write_collection(tmp_path / "s", nodes, docs)
    a = SummaryArchive.open(tmp_path / "s")
    chosen = list(range(3, nodes, 17))
    sub = SubArchive.create(a, "every17", chosen + chosen[:5])
    again = SubArchive.open(a, "every17")
    assert len(again) == len(chosen)
    for r, node in enumerate(chosen):
        assert again.node(r) == node and again.position(node) == r
        s = again.get(r)
        assert (s is None) == (node not in docs)
    assert again.position(4) is None
    assert len(sub) == len(chosen)
    with pytest.raises(ArchiveError):
        SubArchive.open(a, "nope")


def test_malformed_archives_give_clear_errors(tmp_path):
    nodes = 400
    docs = random_collection(4, nodes)
    write_collection(tmp_path / "s", nodes, docs)
    good = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def restore():
        for name, data in good.items():
            (tmp_path / name).write_bytes(data)

    def expect_error(fn=lambda a: a.decode_all()):
        with pytest.raises(ArchiveError):
            fn(SummaryArchive.open(tmp_path / "s"))

    (tmp_path / "s.bits").write_bytes(good["s.bits"][: len(good["s.bits"]) // 2])
    expect_error()
    restore()
    (tmp_path / "s.pointers.ef").write_bytes(good["s.pointers.ef"][:-16])
    expect_error()
    restore()
    (tmp_path / "s.properties").write_text("{not json")
    expect_error()
    restore()
    (tmp_path / "s.terms").write_text("a\t1\n")
    expect_error()
    restore()
    (tmp_path / "s.missing.ef").unlink()
    expect_error()
    restore()
    # Garbage bits of the right length: detected while decoding, never a crash or a wrong answer.
    rng = np.random.default_rng(0)
    (tmp_path / "s.bits").write_bytes(rng.integers(0, 256, len(good["s.bits"]), dtype=np.uint8).tobytes())
    expect_error()
    expect_error(lambda a: [a.get(n) for n in sorted(docs)])
    restore()
    assert SummaryArchive.open(tmp_path / "s").get(sorted(docs)[0]) is not None
    with pytest.raises(ArchiveError):
        SummaryArchive.open(tmp_path / "nowhere")


# -- a small crawled-like collection: WARC files + link records -> `raycrawl summaries build` -----

PAGES = {
    "http://a.test/": "<html><head><title>Gardening tips</title><style>.x{}</style></head>"
                      "<body><p>Roses and tulips grow in gardens. Gardening gardeners garden.</p>"
                      "<a href='http://a.test/roses'>roses</a></body></html>",
    "http://a.test/roses": "<html><body><h1>Roses</h1><p>Roses need sun; roses need water.</p>"
                           "<script>var roses = 1;</script></body></html>",
    "http://b.test/": "<html><body><p>Football and tennis: the gardens of sport. Tennis!</p></body></html>",
    "http://b.test/broken": "<html><body><p>Unclosed <b>tags <i>and tennis roses</body>",
}


def make_crawl(crawl: Path):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from raycrawl.storage.link_records import LinkRecordWriter

    (crawl / "warc").mkdir(parents=True)
    with open(crawl / "warc" / "agent0-00000.warc.gz", "wb") as f:
        w = WARCWriter(f, gzip=True)
        for url, html in PAGES.items():
            body = html.encode()
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers))
        headers = StatusAndHeaders("200 OK", [("Content-Type", "image/png")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record("http://a.test/x.png", "response", payload=io.BytesIO(b"\x89PNG"),
                                            http_headers=headers))
    lw = LinkRecordWriter(crawl)
    recs = [{"url": u, "status": 200, "ctype": "text/html", "links": ["http://a.test/roses", "http://c.test/"]}
            for u in PAGES]
    recs.append({"url": "http://a.test/x.png", "status": 200, "ctype": "image/png", "links": []})
    # An exact duplicate: stored as a WARC revisit (no body here), same text as its representative.
    recs.append({"url": "http://a.test/copy", "status": 200, "ctype": "text/html", "links": [],
                 "dup_of": "http://a.test/roses", "dup_kind": "exact"})
    recs.append({"url": "http://c.test/", "status": 0, "error": "dns", "links": []})
    lw.write_maps(recs)


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(capsys, *args):
    """In-process CLI call through the real entry point (saves an interpreter start-up)."""
    from raycrawl.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return _Result(code, out.out, out.err)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "raycrawl", *map(str, args)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1], timeout=120)


def test_build_from_crawl_dir_cli(tmp_path, capsys):
    crawl = tmp_path / "crawl"
    make_crawl(crawl)
    r = cli(capsys, "summaries", "build", crawl, "--min-df", "1")
    assert r.returncode == 0, r.stderr
    a = SummaryArchive.open(crawl)
    from raycrawl.storage.crawl_graph import node_map

    id_of, url_of, n, _ = node_map(crawl)
    assert a.num_nodes == n == 6  # the 2xx records (4 pages, png, copy); c.test failed: not a node
    assert a.get_terms(id_of("http://a.test/copy")) == a.get_terms(id_of("http://a.test/roses"))
    for url, html in PAGES.items():
        expected = Counter(text.terms(html))
        assert a.get_terms(id_of(url)) == dict(expected)
        assert a.get(id_of(url)).length == len(text.tokens(text.visible_text(html)))
    assert id_of("http://c.test/") is None and a.get(id_of("http://a.test/x.png")) is None
    # Once the graph is built, its URL map gives the ids, and they are the same.
    from raycrawl.storage.crawl_graph import build_crawl_graph
    from raycrawl.storage.urlmap import UrlMap

    build_crawl_graph(crawl)
    id_of2, _, n2, source = node_map(crawl)
    assert "urls.map" in source and n2 == n
    m = UrlMap.open(crawl / "graph" / "urls.map")
    assert all(id_of2(u) == id_of(u) == m.id_of(u) for u in PAGES)
    r = cli(capsys, "summaries", "get", crawl, "http://a.test/roses", "--json")
    got = json.loads(r.stdout)
    assert got["terms"] == dict(Counter(text.terms(PAGES["http://a.test/roses"])))
    r = cli(capsys, "summaries", "stats", crawl, "--json")
    assert json.loads(r.stdout)["documents"] == 5
    # min_df 2 keeps only terms of at least two pages, computed independently here.
    r = cli(capsys, "summaries", "build", crawl, "--min-df", "2", "--code", "term_gap=gamma")
    assert r.returncode == 0, r.stderr
    docs = [*PAGES.values(), PAGES["http://a.test/roses"]]  # the exact copy counts as a document
    df = Counter(t for html in docs for t in set(text.terms(html)))
    a = SummaryArchive.open(crawl)
    assert set(a.terms) == {t for t, d in df.items() if d >= 2}
    r = cli(capsys, "summaries", "sub", crawl, "a-only", "--host", "a.test")
    assert r.returncode == 0, r.stderr
    assert len(SubArchive.open(a, "a-only")) == 4  # /, /roses, /x.png, /copy


def test_cli_user_errors(tmp_path, capsys):
    from test_simulate import assert_user_error

    crawl = tmp_path / "crawl"
    make_crawl(crawl)
    for args in (("summaries", "get", tmp_path / "nowhere", "1"),
                 ("summaries", "stats", crawl),  # not built yet
                 ("summaries", "build", crawl, "--code", "size=zeta99"),
                 ("summaries", "build", crawl, "--min-df", "0"),
                 ("summaries", "build", tmp_path / "empty-dir-missing")):
        assert_user_error(capsys, *args)
    cli(capsys, "summaries", "build", crawl, "--min-df", "1")
    (crawl / "summaries" / "summaries.bits").write_bytes(b"\x00")
    r = run_cli("summaries", "get", crawl, "0")  # a real process: one line, no traceback
    assert r.returncode == 2 and "truncated" in r.stderr and "Traceback" not in r.stderr


def test_per_agent_archives_merge_like_one_build(tmp_path, capsys):
    recs = _record_collection(21, 500)
    urls = sorted(r["url"] for r in recs)
    index = {u: i for i, u in enumerate(urls)}
    direct = build_archive(recs, tmp_path / "direct" / "summaries", index.get, len(urls), min_df=4)
    for k in range(2):  # agent k owns the hosts h{k}, h{k+2}, ...
        mine = [r for r in recs if int(r["url"].split("//h")[1].split(".")[0]) % 2 == k]
        build_archive(mine, tmp_path / f"agent{k}" / "summaries", index.get, len(urls), min_df=1)
    r = cli(capsys, "summaries", "merge", tmp_path / "merged", tmp_path / "agent0", tmp_path / "agent1",
            "--min-df", "4")
    assert r.returncode == 0, r.stderr
    a, b = SummaryArchive.open(tmp_path / "direct"), SummaryArchive.open(tmp_path / "merged")
    assert a.terms == b.terms and np.array_equal(a.df, b.df) and np.array_equal(a.cf, b.cf)
    assert b.props["pairs"] == direct["pairs"] and b.total_bits == a.total_bits
    assert (tmp_path / "direct" / "summaries.bits").read_bytes() == (
        tmp_path / "merged" / "summaries" / "summaries.bits").read_bytes()
    for node in range(len(urls)):
        assert a.get_terms(node) == b.get_terms(node)


def test_a_page_fetched_twice_counts_once(tmp_path, capsys):
    """After a crash, a page in flight is fetched again: two WARC responses and two link records for
    one URL. It is one document: document counts and min-df count it once (from WARC and spill)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from raycrawl.actors.visit.summary_writer import SummaryWriter
    from raycrawl.storage.link_records import LinkRecordWriter
    from raycrawl.text import page_text

    crawl = tmp_path / "crawl"
    make_crawl(crawl)
    again = "http://b.test/"  # a page with words of its own (df 1): counted twice, they would pass min-df 2
    with open(crawl / "warc" / "agent0-00001.warc.gz", "wb") as f:  # the resumed crawl's new file
        w = WARCWriter(f, gzip=True)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(again, "response", payload=io.BytesIO(PAGES[again].encode()),
                                            http_headers=headers))
    LinkRecordWriter(crawl).write_maps([{"url": again, "status": 200, "ctype": "text/html", "links": []}])
    r = cli(capsys, "summaries", "build", crawl, "--min-df", "2")
    assert r.returncode == 0, r.stderr
    docs = [*PAGES.values(), PAGES["http://a.test/roses"]]  # the exact copy is a document; the refetch is not
    assert any(d == 1 for t, d in Counter(t for h in docs for t in set(text.terms(h))).items()
               if t in text.terms(PAGES[again]))
    df = Counter(t for html in docs for t in set(text.terms(html)))
    assert set(SummaryArchive.open(crawl).terms) == {t for t, d in df.items() if d >= 2}
    assert json.loads(cli(capsys, "summaries", "stats", crawl, "--json").stdout)["documents"] == 5
    # the same from the spill of the summary writer
    writer = SummaryWriter(crawl)  # the spill as the crawl writes it: the refetch is spilled again
    writer.add_pages([(url, page_text(html.encode(), "utf-8")) for url, html in [*PAGES.items(), (again, PAGES[again])]])
    writer.close()
    r = cli(capsys, "summaries", "build", crawl, "--min-df", "2", "--from-spill")
    assert r.returncode == 0, r.stderr
    assert set(SummaryArchive.open(crawl).terms) == {t for t, d in df.items() if d >= 2}
