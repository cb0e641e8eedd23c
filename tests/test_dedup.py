"""Post-crawl clustering: union-find, precision/recall against ground truth and exact Jaccard,
and ``raycrawl dedup DIR`` end to end on WARC files written by another library (warcio)."""

from __future__ import annotations

import io
import json
import logging
import random
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import networkx as nx
import pytest

from raycrawl.cli import main
from raycrawl.storage.link_records import LinkRecordWriter
from raycrawl.tasks.dedup import UnionFind, cluster_texts, exact_jaccard_pairs, pair_metrics

VOCAB = [f"w{i}q" for i in range(20000)]
WEIGHTS = [1 / (i + 1) for i in range(20000)]


def corpus(seed: int, clusters: int = 80):
    """(url, text, true cluster): originals, mirrors (≤ 1 edit + shared boilerplate),
    near-misses (25–40 edits: their own cluster), each original with 0–3 mirrors."""
    rng = random.Random(seed)
    boiler = " ".join(rng.choices(VOCAB, WEIGHTS, k=40))
    docs, label = [], 0

    def edit(text, n):
        words = text.split()
        for _ in range(n):
            words[rng.randrange(len(words))] = rng.choice(VOCAB)
        return " ".join(words)

    for c in range(clusters):
        base = f"{boiler} {' '.join(rng.choices(VOCAB, WEIGHTS, k=300))} {boiler}"
        docs.append((f"http://h{c}.test/p", base, label))
        for m in range(rng.randrange(0, 4)):
            docs.append((f"http://mirror{m}.h{c}.test/p", edit(base, rng.randrange(0, 2)), label))
        label += 1
        for m in range(rng.randrange(0, 2)):
            docs.append((f"http://miss{m}.h{c}.test/p", edit(base, rng.randrange(25, 41)), label))
            label += 1
    rng.shuffle(docs)
    return docs


def truth_pairs(docs):
    by = {}
    for i, (_, _, c) in enumerate(docs):
        by.setdefault(c, []).append(i)
    return {(a, b) for members in by.values() for a, b in combinations(members, 2)}


def test_union_find_matches_connected_components():
    rng = random.Random(1)
    n = 500
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(350)]
    uf = UnionFind(n)
    for a, b in edges:
        uf.union(a, b)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    ours = sorted(sorted(m) for m in uf.groups().values())
    theirs = sorted(sorted(c) for c in nx.connected_components(g))
    assert ours == theirs


def test_precision_recall_against_ground_truth_and_exact_jaccard():
    docs = corpus(21)
    result = cluster_texts([(u, t) for u, t, _ in docs])
    predicted = result.pair_set()
    truth = truth_pairs(docs)
    exact = {p for p, j in exact_jaccard_pairs([t for _, t, _ in docs]).items() if j >= 0.9}
    assert len(truth) > 50
    vs_truth, vs_exact = pair_metrics(predicted, truth), pair_metrics(predicted, exact)
    assert vs_truth["precision"] >= 0.95 and vs_truth["recall"] >= 0.95, vs_truth
    assert vs_exact["precision"] >= 0.95 and vs_exact["recall"] >= 0.95, vs_exact
    # Representatives are the first page of each cluster in input order.
    for members in result.clusters:
        assert members == sorted(members)


def test_empty_and_short_pages_are_not_clustered_together():
    docs = [("http://a.test/", ""), ("http://b.test/", ""), ("http://c.test/", "one two"), ("http://d.test/", "one two")]
    result = cluster_texts(docs)
    # Identical short pages are duplicates; empty pages are nobody's duplicate.
    assert result.clusters == [[2, 3]]


def _write_crawl(crawl: Path, docs, revisits):
    """WARC written with warcio (not our writer) + link records with crawl-time dup_of."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    (crawl / "warc").mkdir(parents=True)
    half = len(docs) // 2
    for n, part in enumerate((docs[:half], docs[half:])):
        buf = io.BytesIO()
        writer = WARCWriter(buf, gzip=True)
        for url, text, _ in part:
            html = f"<html><head><title>t</title><script>var x=1;</script></head><body><p>{text}</p></body></html>"
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            rec = writer.create_warc_record(url, "response", payload=io.BytesIO(html.encode()), http_headers=headers)
            writer.write_record(rec)
        (crawl / "warc" / f"agent0-{n:05d}.warc.gz").write_bytes(buf.getvalue())
    LinkRecordWriter(crawl).write_maps(
        [{"url": u, "status": 200, "dup_of": rep, "dup_kind": "near", "links": []} for u, rep in revisits]
    )


def test_dedup_command_end_to_end(tmp_path, capsys):
    docs = corpus(5, clusters=40)
    crawl = tmp_path / "crawl"
    first_url = {}
    for u, _, c in docs:
        first_url.setdefault(c, u)
    # Two pages the crawler suppressed at crawl time (revisit records: no body in the WARC).
    some = next(iter(first_url.items()))
    revisits = [("http://suppressed1.test/p", some[1]), ("http://suppressed2.test/p", some[1])]
    _write_crawl(crawl, docs, revisits)

    assert main(["dedup", str(crawl)]) == 0
    out = capsys.readouterr().out
    assert "clusters" in out and "clusters.jsonl" in out
    clusters = [json.loads(line) for line in (crawl / "dedup" / "clusters.jsonl").read_text().splitlines()]
    summary = json.loads((crawl / "dedup" / "summary.json").read_text())
    label = {u: c for u, _, c in docs}
    label.update({u: label[rep] for u, rep in revisits})
    expected = {}
    for u, c in label.items():
        expected.setdefault(c, set()).add(u)
    expected = {frozenset(m) for m in expected.values() if len(m) > 1}
    got = {frozenset(c["members"]) for c in clusters}
    assert got == expected
    for c in clusters:
        assert c["size"] == len(c["members"]) and c["representative"] == c["members"][0]
        assert c["representative"] == first_url[label[c["representative"]]]
    assert summary["pages_with_text"] == len(docs)
    assert summary["pages_total"] == len(docs) + 2
    assert summary["duplicate_pages"] == sum(len(m) - 1 for m in expected)
    assert summary["crawl_time_duplicates"] == {"near": 2}
    assert sum(c["crawl_time"] for c in clusters) == 2
    import pyarrow.parquet as pq  # the same clusters as a table, one row per page

    table = pq.read_table(crawl / "dedup" / "clusters.parquet").to_pylist()
    by_cluster: dict[int, set[str]] = {}
    for row in table:
        by_cluster.setdefault(row["cluster"], set()).add(row["url"])
    assert {frozenset(m) for m in by_cluster.values()} == expected
    assert {r["url"] for r in table if r["representative"]} == {c["representative"] for c in clusters}
    assert sum(r["crawl_time"] for r in table) == 2
    from png_check import assert_picture

    assert_picture(crawl / "dedup" / "cluster-sizes.png")

    from raycrawl.commands.dedup import demo_stage

    assert f"clusters (≥ 2 pages): {len(expected)}" in demo_stage(crawl)


def test_damaged_warc_is_skipped_with_a_warning(tmp_path, caplog):
    docs = corpus(9, clusters=10)
    crawl = tmp_path / "crawl"
    _write_crawl(crawl, docs, [])
    files = sorted((crawl / "warc").glob("*.warc.gz"))
    data = files[1].read_bytes()
    files[1].write_bytes(data[: len(data) // 2] + b"\x00garbage")
    from raycrawl.tasks.dedup import cluster_crawl

    with caplog.at_level(logging.WARNING, logger="raycrawl.tasks.dedup"):
        summary = cluster_crawl(crawl)
    # Everything in the intact file is still read; the broken one is logged and named, not fatal.
    assert len(docs) // 2 <= summary["pages_with_text"] < len(docs)
    assert summary["damaged_warc_files"] == [files[1].name]
    assert any(files[1].name in r.getMessage() for r in caplog.records)
    assert files[1].name in (crawl / "dedup" / "report.txt").read_text()
    # A cut (not corrupted) file is reported too, and an intact one is not.
    from raycrawl.tasks.dedup import gzip_damage

    files[1].write_bytes(data[: len(data) - 7])
    assert gzip_damage(files[1]) == "truncated gzip member"
    assert gzip_damage(files[0]) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["dedup", "/nonexistent/crawl"], "no such directory"),
        (["dedup", "{tmp}"], "not a crawl directory"),
        (["dedup", "{crawl}", "--bands", "30"], "bands × rows ≤ num-perm"),
        (["dedup", "{crawl}", "--threshold", "1.5"], "threshold"),
    ],
)
def test_user_errors_are_one_line(tmp_path, argv, message):
    crawl = tmp_path / "crawl"
    (crawl / "warc").mkdir(parents=True)
    argv = [a.format(tmp=tmp_path, crawl=crawl) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "raycrawl", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
