"""K, K*, 2DRank, κ, personalized HITS, spectrum/invariant subspaces, rank outputs and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow.parquet as pq
import pytest
from test_pagerank import CNR, dense_s, nx_vector, random_graph

from raycrawl.cli import main
from raycrawl.tasks.hits import personalized_hits
from raycrawl.tasks.pagerank import LinkMatrix, csr_from_edges, pagerank
from raycrawl.tasks.rank_output import density, write_density_png, write_parquet, write_tsv
from raycrawl.tasks.ranks2d import compute_ranks, kappa, rank_indices, two_d_rank
from raycrawl.tasks.spectrum import google_spectrum, invariant_subspaces

# ---- K, K*, K2, κ ---------------------------------------------------------------------------


def test_rank_indices_order_and_tie_rule():
    p = np.array([0.1, 0.3, 0.3, 0.05, 0.25])
    k = rank_indices(p)
    assert sorted(k.tolist()) == [1, 2, 3, 4, 5]
    assert k[1] == 1 and k[2] == 2  # tie: lower node id first
    assert all(p[i] >= p[j] for i in range(5) for j in range(5) if k[i] < k[j])


def brute_force_2drank(k: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """Literal reading of the definition: walk the ribs of squares of size m = 1..N and count nodes."""
    at = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(k, ks, strict=True))}
    order = []
    for m in range(1, len(k) + 1):
        for s in range(1, m + 1):
            # on each square, walk from the axes toward the corner; at equal distance the K* = m rib first
            for point in dict.fromkeys([(s, m), (m, s)]):
                if point in at:
                    order.append(at[point])
    k2 = np.empty(len(k), dtype=np.int64)
    k2[order] = np.arange(1, len(k) + 1)
    return k2


@pytest.mark.parametrize("seed", range(5))
def test_two_d_rank_matches_walk_on_square_ribs(seed):
    rng = np.random.default_rng(seed)
    n = 150
    k = rng.permutation(n) + 1
    ks = rng.permutation(n) + 1
    k2 = two_d_rank(k, ks)
    assert np.array_equal(k2, brute_force_2drank(k, ks))
    assert sorted(k2.tolist()) == list(range(1, n + 1))


def test_two_d_rank_of_identical_rankings_is_the_ranking():
    k = np.random.default_rng(0).permutation(50) + 1
    assert np.array_equal(two_d_rank(k, k), k)


def test_kappa():
    p = np.random.default_rng(1).random(100)
    p /= p.sum()
    assert kappa(p, np.full(100, 0.01)) == pytest.approx(0.0, abs=1e-12)  # uncorrelated with uniform
    assert kappa(p, p) == pytest.approx(100 * float((p * p).sum()) - 1)
    assert kappa(p, p) > 0


def test_compute_ranks_consistent():
    g, m = random_graph(3)
    rs = compute_ranks(m, tol=1e-13)
    ref_p = nx_vector(nx.pagerank(g, tol=1e-15, max_iter=10_000), m.num_nodes)
    ref_c = nx_vector(nx.pagerank(g.reverse(copy=True), tol=1e-15, max_iter=10_000), m.num_nodes)
    assert rs.kappa == pytest.approx(m.num_nodes * float(ref_p @ ref_c) - 1, abs=1e-6)
    assert np.array_equal(rs.K2, brute_force_2drank(rs.K, rs.Kstar))


# ---- personalized HITS ------------------------------------------------------------------------


def test_hits_without_supersource_matches_networkx():
    g, m = random_graph(8, n=200, m=1200, dangling_frac=0.05)
    ours = personalized_hits(m, c=0.0, tol=1e-13, max_iter=20_000)
    hubs, auths = nx.hits(g, max_iter=20_000, tol=1e-14)
    a = ours.authority / ours.authority.sum()
    h = ours.hub / ours.hub.sum()
    assert ours.converged
    assert np.abs(a - nx_vector(auths, m.num_nodes)).max() < 1e-8
    assert np.abs(h - nx_vector(hubs, m.num_nodes)).max() < 1e-8


def test_personalized_hits_satisfies_equations_7_8():
    _, m = random_graph(9, n=200, m=800)
    p = np.zeros(m.num_nodes)
    p[[3, 17, 99]] = [1.0, 2.0, 1.0]
    c = 2.0
    r = personalized_hits(m, c=c, personalization=p, tol=1e-14, max_iter=20_000)
    assert r.converged
    adj = np.zeros((m.num_nodes, m.num_nodes))  # adj[u, v] = 1 for an arc u → v
    succ = m.reversed()
    for u in range(m.num_nodes):
        adj[u, succ.pred_indices[succ.pred_indptr[u] : succ.pred_indptr[u + 1]]] = 1.0
    pn = p / p.sum()
    a_hat = adj.T @ r.hub + c * pn
    h_hat = adj @ r.authority + c * pn
    assert np.abs(r.authority - a_hat / a_hat.max()).max() < 1e-10
    assert np.abs(r.hub - h_hat / h_hat.max()).max() < 1e-10
    assert r.authority.max() == pytest.approx(1.0) and r.hub.max() == pytest.approx(1.0)


def test_supersource_reaches_isolated_seed():
    # Node 5 has no arcs at all: only the supersource gives it a score.
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    m = LinkMatrix.from_successors(*csr_from_edges(src, dst, 6))
    p = np.zeros(6)
    p[5] = 1.0
    assert personalized_hits(m, c=0.0).authority[5] == 0.0
    assert personalized_hits(m, c=1.0, personalization=p).authority[5] > 0.0
    with pytest.raises(ValueError):
        personalized_hits(m, c=-1.0)


# ---- spectrum --------------------------------------------------------------------------------


def planted_graph(seed: int):
    """Random core with dangling nodes plus closed subspaces: a 3-cycle, a 2-cycle, a self-loop, a feeder."""
    rng = np.random.default_rng(seed)
    n_core = 120
    src = rng.integers(0, n_core, 360)
    dst = rng.integers(0, n_core, 360)
    src = np.where(src >= n_core - 10, src - 10, src)  # nodes 110..119 have no out-links: dangling
    extra = [(120, 121), (121, 122), (122, 120), (123, 124), (124, 123), (125, 125), (3, 120), (4, 123),
             (126, 123), (127, 126), (5, 127)]
    src = np.r_[src, [a for a, _ in extra]]
    dst = np.r_[dst, [b for _, b in extra]]
    return LinkMatrix.from_successors(*csr_from_edges(src, dst, 128))


@pytest.mark.parametrize("seed", [0, 1])
def test_invariant_subspaces_and_unit_eigenvalues_match_dense(seed):
    m = planted_graph(seed)
    dec = invariant_subspaces(m)
    ev = np.linalg.eigvals(dense_s(m))
    n_unit = int((np.abs(ev - 1.0) < 1e-8).sum())
    assert dec.N_1 == n_unit == 3
    # {120, 121, 122}, {125}, and {123, 124} with the feeders 126 → 123 and 127 → 126 merged in
    assert dec.N_d == 3 and dec.d_max == 4
    assert (dec.N_d, dec.d_max) == paper_subspaces(m, ~dec.core)
    # Independent reachability: a node is in the subspace part iff it reaches no dangling node.
    g = nx.DiGraph()
    g.add_nodes_from(range(m.num_nodes))
    succ = m.reversed()
    for u in range(m.num_nodes):
        g.add_edges_from((u, int(v)) for v in succ.pred_indices[succ.pred_indptr[u] : succ.pred_indptr[u + 1]])
    dangling = set(m.dangling.tolist())
    cannot = {u for u in g if not (nx.descendants(g, u) | {u}) & dangling}
    assert set(np.flatnonzero(~dec.core).tolist()) == cannot
    assert dec.N_s == len(cannot)


def test_spectrum_eigenvalues_match_dense():
    m = planted_graph(2)
    sp_ = google_spectrum(m, k=8)
    ev = np.linalg.eigvals(dense_s(m))
    ours = np.r_[sp_.subspace, sp_.core]
    top_dense = np.sort(np.abs(ev))[::-1][:8]
    top_ours = np.sort(np.abs(ours))[::-1][:8]
    assert np.allclose(top_ours, top_dense, atol=1e-7)
    # every subspace eigenvalue is an eigenvalue of S
    for lam in sp_.subspace:
        assert np.min(np.abs(ev - lam)) < 1e-6
    assert sp_.as_dict()["unit_eigenvalues_found"] == 3


@pytest.mark.parametrize("method", ["arnoldi", "arpack"])
def test_core_eigenvalues_match_dense_core_block(method):
    from raycrawl.tasks.spectrum import core_eigenvalues

    m = planted_graph(3)
    dec = invariant_subspaces(m)
    idx = np.flatnonzero(dec.core)
    assert len(idx) > 64  # exercise the iterative path, not the dense shortcut
    ev = np.linalg.eigvals(dense_s(m)[np.ix_(idx, idx)])
    ours = core_eigenvalues(m, dec.core, k=6, method=method)
    ref = ev[np.argsort(-np.abs(ev), kind="stable")][:6]
    assert np.allclose(np.abs(ours), np.abs(ref), atol=1e-8)
    assert np.abs(ours[0]) < 1.0  # the core leaks mass to the subspaces: no λ = 1 there


def paper_subspaces(m, outside_core: np.ndarray) -> tuple[int, int]:
    """(N_d, d_max) by the paper's recipe, literally: the set reachable from each node outside the
    core (networkx), sets that share a node merged until none do."""
    g = nx.DiGraph()
    g.add_nodes_from(range(m.num_nodes))
    succ = m.reversed()
    for u in range(m.num_nodes):
        g.add_edges_from((u, int(v)) for v in succ.pred_indices[succ.pred_indptr[u] : succ.pred_indptr[u + 1]])
    sets = [nx.descendants(g, int(v)) | {int(v)} for v in np.flatnonzero(outside_core)]
    merged: list[set[int]] = []
    for r in sets:
        for other in [x for x in merged if x & r]:
            merged.remove(other)
            r = r | other
        merged.append(r)
    return len(merged), max((len(x) for x in merged), default=0)


def test_subspaces_merge_as_the_paper_counts_them():
    """Worked by hand: core 0 → 1 (1 dangling); 2 → 3 ⟲ and 2 → 4 ⟲ (two closed pages reached
    from one): node 2's reachable set {2, 3, 4} contains both, so one subspace of 3 nodes holding
    two eigenvalues λ = 1 (N_1 = 2 > N_d = 1, the situation of the paper's Table 2); 5 ⇄ 6 a
    second subspace; 7 → 5 joins it."""
    src = np.array([0, 2, 2, 3, 4, 5, 6, 7])
    dst = np.array([1, 3, 4, 3, 4, 6, 5, 5])
    m = LinkMatrix.from_successors(*csr_from_edges(src, dst, 8))
    dec = invariant_subspaces(m)
    assert dec.core.tolist() == [True, True] + [False] * 6
    assert (dec.N_s, dec.N_d, dec.d_max, dec.N_1) == (6, 2, 3, 3)
    assert (dec.N_d, dec.d_max) == paper_subspaces(m, ~dec.core)
    assert int((np.abs(np.linalg.eigvals(dense_s(m)) - 1.0) < 1e-8).sum()) == dec.N_1
    assert dec.subspace[2] == dec.subspace[3] == dec.subspace[4] != dec.subspace[5] == dec.subspace[7]


def test_unit_circle_count_and_the_spectrum_of_g_star_match_dense():
    """N_circ (|λ| = 1: the planted 3-cycle's cube roots of unity, the 2-cycle's ±1, the self-loop's
    1) for G, and the same quantities for G* (the reversed graph), against dense eigenvalues."""
    m = planted_graph(0)
    for matrix in (m, m.reversed()):
        sp_ = google_spectrum(matrix, k=8)
        ev = np.linalg.eigvals(dense_s(matrix))
        assert sp_.N_circ == int((np.abs(np.abs(ev) - 1.0) < 1e-8).sum())
        assert int((np.abs(ev - 1.0) < 1e-8).sum()) == sp_.decomposition.N_1
    assert google_spectrum(m, k=8).N_circ == 6


def test_no_dangling_means_no_core():
    src, dst = np.array([0, 1, 2, 3]), np.array([1, 0, 3, 2])
    dec = invariant_subspaces(LinkMatrix.from_successors(*csr_from_edges(src, dst, 4)))
    assert not dec.core.any() and dec.N_d == 2 and dec.N_1 == 2


# ---- outputs ---------------------------------------------------------------------------------


def test_outputs_round_trip(tmp_path):
    _, m = random_graph(1, n=300, m=1000)
    rs = compute_ranks(m)
    urls = {i: f"http://h{i % 7}.test/p{i}" for i in range(0, 300, 2)}
    write_parquet(rs, tmp_path, urls.get)
    write_tsv(rs, tmp_path, urls.get)
    t = pq.read_table(tmp_path / "ranks.parquet").to_pydict()
    assert list(t) == ["node", "url", "pagerank", "cheirank", "K", "Kstar", "K2"]
    assert t["node"] == list(range(300))
    assert t["url"][2] == urls[2] and t["url"][3] == ""
    assert np.array_equal(np.array(t["pagerank"]), rs.pagerank.vector)
    lines = (tmp_path / "ranks.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["node", "url", "pagerank", "cheirank", "K", "Kstar", "K2"]
    assert len(lines) == 301
    row = lines[5].split("\t")  # node 4 (line 0 is the header)
    assert row[1] == urls[4] and float(row[2]) == rs.pagerank.vector[4] and int(row[6]) == rs.K2[4]
    assert lines[4].split("\t")[1] == ""  # node 3 has no URL
    h, edges = density(rs)
    # K and K* are permutations: every row and every column of cells holds exactly its ranks
    assert edges[0] == 1 and edges[-1] == 301 and (np.diff(edges) >= 1).all()
    assert (h.sum(axis=1) == np.diff(edges)).all() and (h.sum(axis=0) == np.diff(edges)).all()
    png = write_density_png(rs, tmp_path)
    from png_check import assert_picture

    assert_picture(png)
    # a group of tied values fills a band of ranks: it is found and named
    from raycrawl.tasks.rank_output import tie_groups

    vals = np.array([0.5, 0.1, 0.1, 0.3, 0.1, 0.2, 0.2])
    assert tie_groups(vals, np.array([1, 5, 6, 3, 7, 2, 4]), 2) == [(3, 5, 7), (2, 2, 4)]


# ---- CLI -------------------------------------------------------------------------------------


@pytest.fixture
def small_bv(tmp_path):
    from raycrawl.storage import bvgraph

    g, m = random_graph(12, n=500, m=2500)
    succ = m.reversed()
    base = tmp_path / "g" / "bv"
    base.parent.mkdir()
    bvgraph.store(base, succ.pred_indptr, succ.pred_indices)
    return g, m, base


def test_cli_on_bv_graph(small_bv, tmp_path, capsys):
    g, m, base = small_bv
    out = tmp_path / "out"
    assert main(["rank", "--graph", str(base), "--out", str(out), "--format", "tsv", "--tol", "1e-13",
                 "--hits", "1.0", "--spectrum", "5"]) == 0
    printed = capsys.readouterr().out
    ref = nx_vector(nx.pagerank(g, tol=1e-15, max_iter=10_000), m.num_nodes)
    t = pq.read_table(out / "ranks.parquet").to_pydict()
    assert np.abs(np.array(t["pagerank"]) - ref).sum() < 1e-8
    assert "authority" in t and "hub" in t
    summary = json.loads((out / "rank.json").read_text())
    assert summary["N"] == 500 and summary["alpha"] == 0.85
    assert summary["pagerank"]["iterations"] == len(summary["pagerank"]["residuals"])
    assert summary["pagerank"]["residuals"][-1] < 1e-13
    assert summary["kappa"] == pytest.approx(500 * float(np.dot(t["pagerank"], t["cheirank"])) - 1)
    assert summary["spectrum"]["N"] == summary["spectrum_star"]["N"] == 500
    assert summary["spectrum"]["n_arnoldi"] == 200 and "spectrum of G* (alpha=1)" in printed
    assert main(["rank", "--graph", str(base), "--out", str(tmp_path / "o2"), "--spectrum", "5", "--arnoldi-dim", "3",
                 "--no-png"]) == 2  # n_A below 2 x K: one line, exit 2
    assert main(["rank", "--graph", str(base), "--out", str(tmp_path / "o2"), "--spectrum", "5", "--arnoldi-dim", "40",
                 "--no-png"]) == 0
    assert json.loads((tmp_path / "o2" / "rank.json").read_text())["spectrum_star"]["n_arnoldi"] == 40
    top = int(np.argmax(ref))
    assert summary["top"]["pagerank"][0]["node"] == top
    assert f" {top} " in printed.split("top 10 by PageRank:")[1].splitlines()[1]
    assert (out / "ranks.tsv").exists() and (out / "rank-density.png").exists()


def test_cli_personalize_file(small_bv, tmp_path):
    g, m, base = small_bv
    pfile = tmp_path / "p.txt"
    pfile.write_text("# seeds\n7 2\n42\n\n7 1  # more weight on 7\n")
    out = tmp_path / "out"
    assert main(["rank", "--graph", str(base), "--out", str(out), "--personalize", str(pfile), "--tol", "1e-13",
                 "--no-png"]) == 0
    ref = nx_vector(nx.pagerank(g, personalization={7: 3.0, 42: 1.0}, tol=1e-15, max_iter=10_000), 500)
    t = pq.read_table(out / "ranks.parquet").to_pydict()
    assert np.abs(np.array(t["pagerank"]) - ref).sum() < 1e-8
    assert json.loads((out / "rank.json").read_text())["personalized"] is True


def test_cli_distributed_same_as_single(small_bv, tmp_path, ray_local):
    _, _, base = small_bv
    for name, extra in (("single", ["--threads", "1"]), ("dist", ["--distributed", "--blocks", "2"]),
                        ("two", ["--threads", "2"])):
        assert main(["rank", "--graph", str(base), "--out", str(tmp_path / name), "--no-png", *extra]) == 0
    a = pq.read_table(tmp_path / "single" / "ranks.parquet")
    b = pq.read_table(tmp_path / "dist" / "ranks.parquet")
    assert a.equals(b) and a.equals(pq.read_table(tmp_path / "two" / "ranks.parquet"))


@pytest.mark.parametrize(
    "argv_tail, pfile_text, message",
    [
        (["--alpha", "1.5"], None, "--alpha"),
        (["--tol", "0"], None, "--tol"),
        (["--threads", "0"], None, "--threads"),
        (["--personalize", "{p}"], "3 abc\n", "not a number"),
        (["--personalize", "{p}"], "99999 1\n", "out of range"),
        (["--personalize", "{p}"], "http://x.test/ 1\n", "no URL map"),
        (["--personalize", "{p}"], "# nothing\n4 0\n", "no positive weight"),
        (["--personalize", "{p}"], "4 -1\n", ">= 0"),
        (["--personalize", "{p}missing"], None, "cannot read"),
    ],
)
def test_cli_user_errors(small_bv, tmp_path, capsys, argv_tail, pfile_text, message):
    _, _, base = small_bv
    pfile = tmp_path / "p.txt"
    if pfile_text is not None:
        pfile.write_text(pfile_text)
    tail = [a.replace("{p}", str(pfile)) for a in argv_tail]
    assert main(["rank", "--graph", str(base), "--out", str(tmp_path / "o"), *tail]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_missing_and_corrupt_graph(small_bv, tmp_path, capsys):
    _, _, base = small_bv
    assert main(["rank", "--graph", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no BV graph" in capsys.readouterr().err
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    assert main(["rank", str(crawl)]) == 2
    assert "raycrawl graph" in capsys.readouterr().err
    assert main(["rank", str(tmp_path / "absent")]) == 2
    assert "not a directory" in capsys.readouterr().err
    # A truncated .graph stream: the decoder's failure becomes one clear line.
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in base.parent.iterdir():
        shutil.copy(f, bad / f.name)
    data = (bad / "bv.graph").read_bytes()
    (bad / "bv.graph").write_bytes(data[: len(data) // 3])
    assert main(["rank", "--graph", str(bad / "bv"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "bv" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o2" / "ranks.parquet").exists()


def test_cli_crawl_dir_layout(small_bv, tmp_path):
    """``raycrawl rank DIR`` reads DIR/graph/bv.* and writes next to the crawl's other outputs."""
    _, m, base = small_bv
    crawl = tmp_path / "crawl"
    (crawl / "graph").mkdir(parents=True)
    for f in base.parent.iterdir():
        shutil.copy(f, crawl / "graph" / f.name)
    assert main(["rank", str(crawl), "--no-png"]) == 0
    assert json.loads((crawl / "rank.json").read_text())["N"] == m.num_nodes
    assert (crawl / "ranks.parquet").exists()


def test_cli_crawl_dir_with_url_map(small_bv, tmp_path, capsys):
    """URLs from DIR/graph/urls.map fill the url column, the top listings, and resolve --personalize URLs."""
    from raycrawl.storage.urlmap import UrlMap

    g, m, base = small_bv
    crawl = tmp_path / "crawl"
    (crawl / "graph").mkdir(parents=True)
    for f in base.parent.iterdir():
        shutil.copy(f, crawl / "graph" / f.name)
    umap = UrlMap.build([f"http://h{i % 5}.test/p{i}" for i in range(m.num_nodes)], crawl / "graph" / "urls.map")
    target = "http://h3.test/p8"
    pfile = tmp_path / "p.txt"
    pfile.write_text("HTTP://H3.test/p8 1\n")  # not canonical: canonicalised before the lookup
    assert main(["rank", str(crawl), "--personalize", str(pfile), "--format", "tsv", "--no-png", "--top", "3",
                 "--tol", "1e-13"]) == 0
    printed = capsys.readouterr().out
    node = umap.id_of(target)
    ref = nx_vector(nx.pagerank(g, personalization={node: 1.0}, tol=1e-15, max_iter=10_000), m.num_nodes)
    t = pq.read_table(crawl / "ranks.parquet").to_pydict()
    assert np.abs(np.array(t["pagerank"]) - ref).sum() < 1e-8
    assert t["url"][node] == target and t["url"] == [umap.url_of(i) for i in range(m.num_nodes)]
    top = int(np.argmax(ref))
    assert umap.url_of(top) in printed.split("top 3 by PageRank:")[1].splitlines()[1]
    rows = (crawl / "ranks.tsv").read_text().splitlines()
    assert rows[node + 1].split("\t")[1] == target
    (pfile).write_text("http://unknown.test/ 1\n")
    assert main(["rank", str(crawl), "--personalize", str(pfile), "--no-png"]) == 2
    assert "not in the graph's URL map" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not Path(str(CNR) + ".graph").exists(), reason="cnr-2000 not available")
def test_cli_cnr2000(tmp_path, capsys):
    assert main(["rank", "--graph", str(CNR), "--out", str(tmp_path), "--top", "3"]) == 0
    printed = capsys.readouterr().out
    pr_top = printed.split("top 3 by PageRank:")[1].split("top 3 by CheiRank:")[0].split()
    assert {pr_top[1], pr_top[4]} == {"60595", "60597"} and pr_top[7] == "285152"
    cr_top = printed.split("top 3 by CheiRank:")[1].split()
    assert cr_top[1] == "2132" and cr_top[4] == "85777"
    summary = json.loads((tmp_path / "rank.json").read_text())
    assert summary["N"] == 325_557 and summary["arcs"] == 3_216_152 and summary["pagerank"]["converged"]
    top = summary["top"]["pagerank"]
    assert {top[0]["node"], top[1]["node"]} == {60595, 60597} and top[2]["node"] == 285152
    assert top[0]["pagerank"] == top[1]["pagerank"]  # the exact tie (JSON floats round-trip)
    assert top[0]["node"] == 60595  # tie rule: lower node id first
    assert [r["node"] for r in summary["top"]["cheirank"][:2]] == [2132, 85777]
    t = pq.read_table(tmp_path / "ranks.parquet", columns=["pagerank", "cheirank"]).to_pydict()
    p, ps = np.array(t["pagerank"]), np.array(t["cheirank"])
    assert summary["kappa"] == pytest.approx(len(p) * float(p @ ps) - 1, rel=1e-12)


def test_pagerank_single_node_and_empty():
    m = LinkMatrix.from_successors(np.array([0, 0]), np.array([], dtype=np.int32))
    assert pagerank(m).vector.tolist() == [1.0]
    m0 = LinkMatrix.from_successors(np.array([0]), np.array([], dtype=np.int32))
    assert len(pagerank(m0).vector) == 0


def test_demo_stage(small_bv, tmp_path):
    from raycrawl.commands.rank import demo_stage

    _, m, base = small_bv
    crawl = tmp_path / "crawl"
    (crawl / "graph").mkdir(parents=True)
    for f in base.parent.iterdir():
        shutil.copy(f, crawl / "graph" / f.name)
    text = demo_stage(crawl)
    summary = json.loads((crawl / "rank.json").read_text())
    assert f"kappa = {summary['kappa']:.4f}" in text
    assert "top 5 by 2DRank:" in text and (crawl / "rank-density.png").exists()
