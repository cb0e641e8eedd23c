"""Temporal search between two crawls: change scores, personalized PageRank (vs networkx on the
same candidate subgraph) and HITS, through ``raycrawl search --temporal``."""

from __future__ import annotations

import json
import math
import random

import networkx as nx
import numpy as np
import pytest
from test_search_cli import _write_crawl
from test_summaries import cli

from raycrawl.commands.search import open_index
from raycrawl.tasks.hits import personalized_hits
from raycrawl.tasks.temporal_search import (
    HITS_C,
    change_scores,
    epoch_links,
    personalized_pagerank,
    subgraph_matrix,
)
from raycrawl.text import terms

N = 40


def _web(epoch: int):
    """Pages with random text and links; in epoch 1 pages 0-9 grow, gain links and mention 'eruption'."""
    rng = random.Random(100 + epoch)
    base = random.Random(7)
    vocab = [f"word{i}" for i in range(300)]
    pages, links = {}, {}
    for i in range(N):
        words = [base.choice(vocab) for _ in range(60 + 5 * i)]
        out = base.sample(range(N), 3)
        if epoch == 1 and i < 10:
            words += ["eruption", "volcano"] * (i + 1) + [rng.choice(vocab) for _ in range(40)]
            out += rng.sample(range(N), 4)
        if i == 25:
            words += ["eruption"]  # an unchanged page that also matches
        url = f"http://h{i % 5}.test:8080/p{i}"  # with a port, as crawled URLs of websim have
        pages[url] = (f"<html><head><title>Page {i} of epoch {epoch}</title></head><body><p>" + " ".join(words)
                      + "</p></body></html>").encode()
        links[url] = [f"http://h{j % 5}.test:8080/p{j}" for j in out if j != i]
    return pages, links


@pytest.fixture(scope="module")
def two_crawls(tmp_path_factory):
    root = tmp_path_factory.mktemp("temporal")
    webs = []
    for e in (0, 1):
        pages, links = _web(e)
        _write_crawl(root / f"e{e}", pages, links)
        webs.append((pages, links))
    return root, webs


def test_change_and_ranks_against_independent_computation(two_crawls, capsys):
    root, webs = two_crawls
    assert cli(capsys, "index", "build", root / "e1", "--crawl", root / "e0").returncode == 0
    index = open_index(root / "e1")
    id_of = {u: i for i, u in enumerate(index.urls)}
    arcs = [epoch_links(root / f"e{e}", id_of) for e in (0, 1)]
    change = change_scores(index, arcs[0], arcs[1], 0, 1)
    for url, i in id_of.items():
        indeg = [sum(url in set(ls) for ls in webs[e][1].values()) for e in (0, 1)]
        outdeg = [len(set(webs[e][1][url])) for e in (0, 1)]
        words = [len(terms(webs[e][0][url])) for e in (0, 1)]
        want = sum(abs(math.log((b + 1) / (a + 1))) for a, b in (indeg, outdeg, words))
        assert change[i] == pytest.approx(want)
    nodes = list(range(0, N, 2))
    p = np.random.default_rng(1).random(len(nodes))
    p /= p.sum()
    ppr = personalized_pagerank(nodes, arcs[1], p, c=0.9)
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from((u, v) for u, v in arcs[1] if u in set(nodes) and v in set(nodes))
    ref = nx.pagerank(g, alpha=0.1, personalization=dict(zip(nodes, p, strict=True)), tol=1e-13, max_iter=1000)
    assert ppr == pytest.approx([ref[u] for u in nodes], abs=1e-9)
    # Personalized HITS on the candidate subgraph (one implementation, tasks/hits.py) at the paper's
    # supersource weight, against the fixed point of eqs. (7)-(8) computed densely from networkx's graph.
    assert HITS_C == 200.0
    r = personalized_hits(subgraph_matrix(nodes, arcs[1]), c=HITS_C, personalization=p, tol=1e-14, max_iter=10_000)
    adj = nx.to_numpy_array(g, nodelist=nodes)  # adj[u, v] = 1 for an arc u → v
    a, h = np.ones(len(nodes)), np.ones(len(nodes))
    for _ in range(10_000):
        a_new = adj.T @ h + HITS_C * p
        a_new /= a_new.max()
        h_new = adj @ a_new + HITS_C * p
        h_new /= h_new.max()
        done = max(np.abs(a_new - a).max(), np.abs(h_new - h).max()) < 1e-14
        a, h = a_new, h_new
        if done:
            break
    assert r.converged and r.authority == pytest.approx(a, abs=1e-10) and r.hub == pytest.approx(h, abs=1e-10)

    r = cli(capsys, "search", root / "e1", "eruption", "--temporal", "0", "1", "--json", "-k", "5")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["results"]) == 5
    # The pages that changed and now mention the query outrank the unchanged matching page 25.
    changed = {f"http://h{i % 5}.test:8080/p{i}" for i in range(10)}
    assert out["results"][0]["url"] in changed
    for method in ("hits-auth", "hits-hub", "baseline"):
        r = cli(capsys, "search", root / "e1", "eruption", "--temporal", "0", "1", "--method", method)
        assert r.returncode == 0 and "result(s)" in r.stdout, r.stderr
    r = cli(capsys, "search", root / "e1", "eruption", "--temporal", "0", "5")
    assert r.returncode == 2 and "epochs" in r.stderr
