"""Focused-crawl simulation: Mercator frontier, relevance, BFS vs best-first on websim topics, CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from raycrawl import text
from raycrawl.policies.frontier_policy import MercatorFrontier
from raycrawl.storage.summaries import SummaryArchive, build_archive
from raycrawl.tasks import relevance as relm
from raycrawl.tasks import simulate as sim

ROOT = Path(__file__).parents[1]


def test_frontier_returns_each_node_once_politely():
    rng = np.random.default_rng(3)
    n = 3000
    host = rng.integers(0, 40, n).tolist()
    delay, fetch = 3.0, 1.0
    f = MercatorFrontier(host, levels=5, back_queues=8, delay=delay, fetch_time=fetch)
    for v in rng.permutation(n).tolist():
        f.add(v, int(rng.integers(0, 5)))
        if v % 3 == 0:
            f.add(v, int(rng.integers(0, 5)))  # re-added with another priority: still fetched once
    out, last_end = [], {}
    while (v := f.next()) is not None:
        out.append(v)
        h = host[v]
        if h in last_end:  # end of previous response -> start of next request >= delay
            assert f.now - fetch - last_end[h] >= delay - 1e-9
        last_end[h] = f.now
    assert sorted(out) == list(range(n))


def test_frontier_serves_higher_priority_first_when_hosts_are_free():
    rng = np.random.default_rng(4)
    n = 500
    levels = rng.integers(0, 10, n)

    def order(bias):
        f = MercatorFrontier(list(range(n)), levels=10, back_queues=1, delay=0.0, bias=bias)  # one host per node
        for v in range(n):
            f.add(v, int(levels[v]))
        out = []
        while (v := f.next()) is not None:
            out.append(v)
        assert sorted(out) == list(range(n))
        return levels[out]

    assert np.all(np.diff(order(1e12)) <= 0)  # an overwhelming bias is strict priority
    got = order(2.0)  # a randomised bias: higher levels early, lower ones not starved
    assert not np.all(np.diff(got) <= 0)
    assert got[: n // 4].mean() > levels.mean() + 1.5 > got[-n // 4:].mean() + 3


def test_front_queue_selector_draws_levels_in_proportion_to_their_weights():
    from raycrawl.policies.front_queues import FrontQueueSelector, split_level, with_level

    sel = FrontQueueSelector(4, bias=3.0, seed=1)
    draws = Counter(sel.pick([5, 0, 5, 5]) for _ in range(26_000))
    assert 1 not in draws  # an empty level is never drawn
    # weights 1, 9, 27 over the non-empty levels 0, 2, 3: expected 700, 6300, 18900 of 26000
    for lvl, want in ((0, 700), (2, 6300), (3, 18900)):
        assert abs(draws[lvl] - want) < 5 * want ** 0.5, (lvl, draws)
    assert sel.pick([0, 0, 0, 0]) is None
    assert sel.plan([2, 0, 0, 1], 10) == [2, 0, 0, 1]  # runs dry: takes what there is
    for path, lvl in (("/a?b=c", 0), ("/a b", 3), ("!robots 1 2.0 /x", 0), ("/", 12)):
        assert split_level(with_level(path, lvl)) == (path, lvl)
    assert with_level("/x", 0) == "/x"


@pytest.fixture(scope="module")
def websim_collection(tmp_path_factory):
    """A small websim web: graph, archive of summaries, topic labels (ground truth)."""
    from raycrawl.websim.model import WebModel

    model = WebModel.generate(hosts=150, ips=20, seed=11)
    coll, records, labels = sim.websim_corpus(model)
    base = tmp_path_factory.mktemp("ws") / "summaries"
    build_archive(records, base, coll.id_of, coll.num_nodes, min_df=3)
    return model, coll, records, labels, SummaryArchive.open(base)


def _check_trace(coll, rel, trace, seeds, delay):
    nodes = [v for v, _ in trace]
    assert len(set(nodes)) == len(nodes)
    fetched = set(seeds)
    for v in nodes:  # every fetch is a seed or a link of an earlier fetch
        assert v in fetched
        fetched.update(coll.indices[coll.indptr[v] : coll.indptr[v + 1]].tolist())
    ends = defaultdict(list)
    for v, t in trace:
        ends[int(coll.host[v])].append(t)
    for ts in ends.values():
        assert all(b - 1.0 - a >= delay - 1e-9 for a, b in zip(ts, ts[1:], strict=False))
    return int(rel.truth[nodes].sum())


def test_best_first_beats_bfs_on_a_websim_topic(websim_collection):
    model, coll, _, labels, archive = websim_collection
    decoded = archive.decode_all()
    topic = Counter(labels.tolist()).most_common(5)[4][0]
    rel = relm.topic_model(decoded, coll.num_nodes, list(archive.terms), labels, topic, train=150)
    assert np.array_equal(rel.truth, labels == topic)
    seeds = sim.websim_seeds(model, coll)
    budget = coll.num_nodes // 10  # fewer than the topic's pages, so a perfect crawl could harvest 1.0
    curves = {}
    for policy in sim.POLICIES:
        trace = []
        # Few back queues: the hosts visited at once are few, and the front queues choose them.
        c = sim.simulate(coll, rel, policy, budget, seeds, delay=4.0, back_queues=8, trace=trace)
        assert c.fetched == len(trace) == budget
        assert int(c.relevant[-1]) == _check_trace(coll, rel, trace, seeds, 4.0)
        curves[policy] = c
    bfs, best = curves["bfs"], curves["best-first"]
    assert best.relevant[-1] > 2 * bfs.relevant[-1], (best.relevant[-1], bfs.relevant[-1])
    assert best.harvest_rate.mean() > bfs.harvest_rate.mean()


def test_term_query_relevance_matches_the_records(websim_collection):
    _, coll, records, _, archive = websim_collection
    word = archive.terms[40]
    rel = relm.term_query(archive.decode_all(), coll.num_nodes, archive.term_id, [word], min_hits=2)
    expected = np.zeros(coll.num_nodes, bool)
    for r in records:
        expected[coll.id_of(r["url"])] = r["terms"].get(word, 0) >= 2
    assert np.array_equal(rel.truth, expected)
    assert np.all((rel.score >= 0.5) == expected)


# -- CLI over a crawl directory --------------------------------------------------------------------


def make_crawl_dir(crawl: Path, coll, records, labels):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from raycrawl.storage.link_records import LinkRecordWriter

    (crawl / "warc").mkdir(parents=True)
    with open(crawl / "warc" / "agent0-00000.warc", "wb") as f:
        w = WARCWriter(f, gzip=False)
        for r in records:
            words = [t for t, c in r["terms"].items() for _ in range(c)]
            body = f"<html><body><p>{' '.join(words)}</p></body></html>".encode()
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(r["url"], "response", payload=io.BytesIO(body),
                                                http_headers=headers))
    lw = LinkRecordWriter(crawl)
    lw.write_maps({"url": coll.url_of(v), "status": 200, "ctype": "text/html",
                    "links": [coll.url_of(w) for w in coll.indices[coll.indptr[v] : coll.indptr[v + 1]].tolist()]}
                   for v in range(coll.num_nodes))
    (crawl / "truth.tsv").write_text("".join(f"{coll.url_of(v)}\t{labels[v]}\n" for v in range(coll.num_nodes)))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "raycrawl", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_simulate_cli_end_to_end(tmp_path, capsys):
    from test_summaries import cli

    from raycrawl.websim.model import WebModel

    model = WebModel.generate(hosts=40, ips=5, seed=5)
    coll, records, labels = sim.websim_corpus(model)
    crawl = tmp_path / "crawl"
    make_crawl_dir(crawl, coll, records, labels)
    from raycrawl.storage.crawl_graph import build_crawl_graph

    build_crawl_graph(crawl)  # the replay then reads the BV graph and its URL map
    r = run_cli("summaries", "build", crawl, "--min-df", "2")
    assert r.returncode == 0, r.stderr
    archive = SummaryArchive.open(crawl)
    from raycrawl.storage.bvgraph import BVGraph

    g = BVGraph.load(crawl / "graph" / "bv")
    loaded = sim.load_collection(crawl)
    assert g.num_nodes == loaded.num_nodes == coll.num_nodes
    for v in range(0, coll.num_nodes, 37):  # same arcs as the websim model's links, by URL
        want = sorted(coll.url_of(w) for w in coll.indices[coll.indptr[v] : coll.indptr[v + 1]].tolist())
        u = loaded.id_of(coll.url_of(v))
        assert sorted(loaded.url_of(w) for w in g.successors(u).tolist()) == want
    # The archive built from HTML in WARCs agrees with the records (words pass the pipeline unchanged).
    for rec in records[:50]:
        got = archive.get_terms(coll.id_of(rec["url"]))
        assert got == {t: c for t, c in rec["terms"].items() if archive.term_id(t) is not None}
        assert text.stems(list(got)) == list(got)
    topic = Counter(labels.tolist()).most_common(3)[2][0]
    r = cli(capsys, "simulate", crawl, "--relevance", f"topic:{topic}", "--truth", crawl / "truth.tsv",
                "--budget", coll.num_nodes, "--train", 100, "--seeds", ",".join(coll.url_of(v) for v in range(3)))
    assert r.returncode == 0, r.stderr
    out = json.loads((crawl / "simulate" / "harvest.json").read_text())
    rows = [line.split("\t") for line in (crawl / "simulate" / "harvest.tsv").read_text().splitlines()[1:]]
    for policy, p in out["policies"].items():
        last = [row for row in rows if row[0] == policy][-1]
        assert int(last[1]) == p["fetched"] and int(last[2]) == p["relevant"]
        assert p["relevant"] <= int((labels == topic).sum())
    assert (crawl / "simulate" / "harvest.png").stat().st_size > 1000
    r = cli(capsys, "simulate", crawl, "--relevance", f"terms:{archive.terms[30]}@2", "--policy", "best-first",
                "--budget", 200, "--out", tmp_path / "q")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "q" / "harvest.json").read_text())["policies"]["best-first"]["fetched"] == 200
    for args in (("--relevance", "nonsense"), ("--relevance", "terms:zzzqqq"), ("--relevance", "topic:x"),
                 ("--relevance", f"topic:{topic}", "--truth", tmp_path / "none.tsv"),
                 ("--relevance", "terms:a", "--policy", "dfs"), ("--relevance", "terms:a", "--budget", "0")):
        assert_user_error(capsys, "simulate", crawl, *args)
    assert_user_error(capsys, "simulate", tmp_path / "nocrawl", "--relevance", "terms:a")


def assert_user_error(capsys, *args):
    """In-process CLI call (same entry point, no interpreter start-up): exit 2 and one line."""
    from raycrawl.cli import main

    capsys.readouterr()
    assert main([str(a) for a in args]) == 2, args
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err, (args, err)
