"""Graph of a crawl: link records -> URL map + BV graph + transpose, via the class, the Ray
actor and the CLI; ground truth computed independently from the records."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from raycrawl.cli import main
from raycrawl.storage.crawl_graph import build_crawl_graph, graph_paths, open_crawl_graph
from raycrawl.storage.link_records import RENDERED_SUBDIR, LinkRecordWriter
from raycrawl.storage.urlmap import UrlMap, url_sort_key


def _crawl_records(seed: int, hosts: int = 25):
    """Crawl-like records: local links, cross-host links, links to never-fetched pages,
    redirects, 404s, errors, a page fetched twice (with different links), self links."""
    rng = random.Random(seed)
    pages = [f"http://{'www.' if h % 3 else ''}site{h}.test/{p}" for h in range(hosts) for p in
             ["", *(f"d{p % 4}/page{p}.html" for p in range(rng.randrange(1, 30)))]]
    pages = [p if p.endswith(("/", ".html")) else p + "/" for p in pages]
    unfetched = [f"http://gone{i}.test/x" for i in range(10)]
    records = []
    for i, url in enumerate(pages):
        roll = rng.random()
        if roll < 0.05:
            records.append({"url": url, "status": 404, "links": [], "redirect": None})
        elif roll < 0.08:
            records.append({"url": url, "status": 0, "error": "connect", "links": []})
        elif roll < 0.12:
            records.append({"url": url, "status": 301, "links": [], "redirect": rng.choice(pages)})
        else:
            k = rng.randrange(0, 25)
            near = [pages[min(len(pages) - 1, max(0, i + rng.randrange(-10, 10)))] for _ in range(k)]
            far = [rng.choice(pages + unfetched) for _ in range(k // 3)]
            links = near + far + ([url] if rng.random() < 0.1 else [])
            records.append({"url": url, "status": 200, "ctype": "text/html", "links": links, "redirect": None})
    again = next(r for r in records if r["status"] == 200)
    records.append({**again, "links": [pages[0], pages[-1]], "epoch": 1})
    records.append({"status": 200, "links": []})  # malformed: no url
    return records


def _expected(records):
    """The documented rule, written independently of the implementation."""
    nodes = {r["url"] for r in records if r.get("url") and (200 <= r["status"] < 300 or (
        300 <= r["status"] < 400 and r.get("redirect")))}
    arcs = set()
    for r in records:
        if r.get("url") not in nodes:
            continue
        targets = r["links"] if r["status"] < 300 else [r["redirect"]]
        arcs |= {(r["url"], t) for t in targets if t in nodes}
    return nodes, arcs


def _exported_arcs(capsys, crawl_dir):
    capsys.readouterr()
    assert main(["graph", "export", str(crawl_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    arcs = {tuple(line.split("\t")) for line in lines}
    assert len(arcs) == len(lines)  # no duplicate arcs
    return arcs


@pytest.mark.parametrize("seed", [0, 1])
def test_cli_build_export_stats(tmp_path, capsys, seed):
    records = _crawl_records(seed)
    w = LinkRecordWriter(tmp_path, records_per_file=40)  # several files
    for i in range(0, len(records), 17):
        w.write_maps(records[i : i + 17])
    nodes, arcs = _expected(records)
    assert main(["graph", "build", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(nodes):,} nodes, {len(arcs):,} arcs" in out
    assert _exported_arcs(capsys, tmp_path) == arcs
    # Ids are the reversed-host sort order; the transpose holds exactly the reversed arcs.
    paths = graph_paths(tmp_path)
    m = UrlMap.open(paths["urlmap"])
    assert list(m) == sorted(nodes, key=url_sort_key)
    g, t, m2 = open_crawl_graph(tmp_path)
    assert len(m2) == g.num_nodes == len(nodes)
    back = {(m.url_of(s), m.url_of(d)) for d in range(t.num_nodes) for s in t.successors(d).tolist()}
    assert back == arcs
    info = json.loads(paths["info"].read_text())
    assert info["records"] == len(records) - 1  # the malformed one is skipped when read
    assert main(["graph", "stats", str(tmp_path), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    from png_check import assert_picture

    assert s["png"] == str(tmp_path / "graph" / "degrees.png")
    assert_picture(tmp_path / "graph" / "degrees.png")
    outdeg = {u: 0 for u in nodes}
    for a, _ in arcs:
        outdeg[a] += 1
    assert s["nodes"] == len(nodes) and s["arcs"] == len(arcs)
    assert s["outdegree"]["max"] == max(outdeg.values())
    assert s["outdegree"]["zero"] == sum(1 for v in outdeg.values() if v == 0)


def test_rendered_records_add_the_dom_links_a_failed_render_included(tmp_path):
    """A rendered page's DOM links join its arcs and are listed apart; a render that timed out
    after the browser gave its DOM keeps those links (the crawl followed them); one that gave no
    DOM adds nothing; a rendered record of a URL that is no node adds no node."""
    a, b, c, d, e = (f"http://s.test/{n}.html" for n in "abcde")
    fetched = [{"url": u, "status": 200, "links": []} for u in (a, b, c, d)]
    fetched[0]["links"] = [b]
    rendered = [{"url": a, "status": 200, "links": [b, c]},
                {"url": b, "status": 200, "links": [d], "error": "render-timeout"},
                {"url": c, "status": 200, "links": [], "error": "render-crashed"},
                {"url": e, "status": 200, "links": [a]}]
    w = LinkRecordWriter(tmp_path)
    w.write_maps(fetched)
    w.close()
    w = LinkRecordWriter(tmp_path, subdir=RENDERED_SUBDIR)
    w.write_maps(rendered)
    w.close()
    info = build_crawl_graph(tmp_path)
    g, _, urls = open_crawl_graph(tmp_path)
    arcs = {(urls.url_of(s), urls.url_of(t)) for s in range(g.num_nodes) for t in g.successors(s).tolist()}
    assert arcs == {(a, b), (a, c), (b, d)}
    marked = {(urls.url_of(int(x)), urls.url_of(int(y)))
              for x, y in (line.split("\t") for line in graph_paths(tmp_path)["rendered"].read_text().splitlines())}
    assert marked == {(a, c), (b, d)}
    assert info["rendered_arcs"] == 2


def test_import_arcs_round_trip_and_bad_input(tmp_path, capsys):
    records = _crawl_records(3)
    LinkRecordWriter(tmp_path / "crawl").write_maps(records)
    build_crawl_graph(tmp_path / "crawl")
    arcs = _exported_arcs(capsys, tmp_path / "crawl")
    f = tmp_path / "arcs.tsv"
    f.write_text("# comment\n\n" + "".join(f"{a}\t{b}\n" for a, b in sorted(arcs)))
    assert main(["graph", "import", "--arcs", str(f), "--out", str(tmp_path / "imp")]) == 0
    assert _exported_arcs(capsys, tmp_path / "imp") == arcs
    # Numeric ids, no URL map: export prints ids.
    f.write_text("0\t5\n5\t0\n3\t3\n")
    assert main(["graph", "import", "--arcs", str(f), "--numeric", "--out", str(tmp_path / "num")]) == 0
    assert _exported_arcs(capsys, tmp_path / "num") == {("0", "5"), ("5", "0"), ("3", "3")}
    assert not graph_paths(tmp_path / "num")["urlmap"].exists()
    # Bad lines: exit 2, one clear line naming file and line, no traceback.
    f.write_text("http://a.test/\thttp://b.test/\nno tab here\n")
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "graph", "import", "--arcs", str(f), "--out",
                           str(tmp_path / "bad")], capture_output=True, text=True)
    assert proc.returncode == 2 and "arcs.tsv:2" in proc.stderr and "Traceback" not in proc.stderr


def test_bv_import_and_corrupt_graph_dir(tmp_path, capsys):
    from raycrawl.storage.bvgraph import csr_from_arcs, store

    rng = np.random.default_rng(4)
    n = 500
    src, dst = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    indptr, indices = csr_from_arcs(n, src, dst)
    store(tmp_path / "src" / "g", indptr, indices)
    assert main(["graph", "import", "--bv", str(tmp_path / "src" / "g"), "--out", str(tmp_path / "o"),
                 "--window", "3"]) == 0
    got = _exported_arcs(capsys, tmp_path / "o")
    assert got == {(str(a), str(b)) for a, b in zip(src.tolist(), dst.tolist(), strict=True)}
    g = graph_paths(tmp_path / "o")["graph"]
    data = g.with_suffix(".graph").read_bytes()
    g.with_suffix(".graph").write_bytes(data[: len(data) // 2])
    for cmd in (["graph", "stats"], ["graph", "export"]):
        proc = subprocess.run([sys.executable, "-m", "raycrawl", *cmd, str(tmp_path / "o")],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and "truncated" in proc.stderr and "Traceback" not in proc.stderr
    assert main(["graph", "build", str(tmp_path / "nowhere")]) == 2
    assert main(["graph", "import", "--bv", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2


def test_websim_graph_round_trip(tmp_path, capsys):
    """Records shaped like a crawl of a websim web (its hosts, paths, links and redirects)."""
    from raycrawl.websim.model import WebModel

    model = WebModel.generate(hosts=40, ips=5, seed=3)
    records = []
    for h in model.hosts:
        for path, page in h.pages.items():
            url = f"http://{h.name}:8080{path}"
            if page.kind == "redirect" and page.location:
                records.append({"url": url, "status": 301, "links": [],
                                "redirect": f"http://{page.location[0]}:8080{page.location[1]}"})
            else:
                records.append({"url": url, "status": page.status, "links": [
                    f"http://{th}:8080{tp}" for th, tp in page.links]})
    LinkRecordWriter(tmp_path).write_maps(records)
    nodes, arcs = _expected(records)
    assert len(arcs) > 500
    info = build_crawl_graph(tmp_path)
    assert (info["nodes"], info["arcs"]) == (len(nodes), len(arcs))
    assert _exported_arcs(capsys, tmp_path) == arcs
