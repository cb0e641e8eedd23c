"""Temporal link features (seed 003 §3.1) against independent computations: Python sets and
networkx for growth/death rates, CRCC and XJaccard; an exact Markov chain over every permutation
of a small graph for PSimRank."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter, defaultdict

import networkx as nx
import numpy as np
import pytest
from scipy import sparse

from raycrawl.tasks import spam_temporal as st


def random_pair(n: int, p: float, change: float, seed: int) -> tuple[nx.DiGraph, nx.DiGraph]:
    rng = random.Random(seed)
    g0 = nx.DiGraph()
    g0.add_nodes_from(range(n))
    g0.add_edges_from((a, b) for a in range(n) for b in range(n) if a != b and rng.random() < p)
    g1 = g0.copy()
    for e in list(g1.edges):
        if rng.random() < change:
            g1.remove_edge(*e)
    for a in range(n):
        for b in range(n):
            if a != b and rng.random() < change * p:
                g1.add_edge(a, b)
    return g0, g1


def as_csr(g: nx.DiGraph, n: int) -> sparse.csr_matrix:
    return nx.to_scipy_sparse_array(g, nodelist=range(n), format="csr", dtype=float).astype(float).tocsr()


def close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) < 1e-9


def test_growth_death_and_crcc_match_sets():
    n = 30
    g0, g1 = random_pair(n, 0.12, 0.3, seed=1)
    f = st.growth_death(as_csr(g0, n), as_csr(g1, n))

    def cc(g, a):
        out = set(g.successors(a))
        return sum(1 for b in out for c in g.successors(b) if c in out) / len(out) if out else math.nan

    rates: dict[str, dict[int, float]] = defaultdict(dict)
    for a in range(n):
        for side, nb in (("I", nx.DiGraph.predecessors), ("O", nx.DiGraph.successors)):
            s0, s1 = set(nb(g0, a)), set(nb(g1, a))
            rates[f"{side}DR"][a] = (len(s0) - len(s0 & s1)) / len(s0) if s0 else math.nan
            rates[f"{side}GR"][a] = (len(s1) - len(s0 & s1)) / len(s0) if s0 else math.nan
    for a in range(n):
        for name in ("IDR", "IGR", "ODR", "OGR"):
            assert close(f[name][a], rates[name][a]), (name, a)
            vals = [rates[name][b] for b in g1.predecessors(a) if not math.isnan(rates[name][b])]
            assert close(f[name + "Mean"][a], float(np.mean(vals)) if vals else math.nan)
            assert close(f[name + "Var"][a], float(np.var(vals)) if vals else math.nan)
        c0, c1 = cc(g0, a), cc(g1, a)
        want = (c1 - c0) / c0 if c0 and not math.isnan(c0) and not math.isnan(c1) else math.nan
        assert close(f["CRCC"][a], want), a
        g, d = rates["IGR"][a], rates["IDR"][a]
        assert close(f["IGR*IDR"][a], g * d)
        assert close(f["IGR/IDR"][a], g / d if d else math.nan)
    assert np.isfinite(f["CRCC"]).sum() > 5  # the graph has enough triangles to test CRCC at all


def test_xjaccard_matches_networkx_distances():
    n = 40
    g0, g1 = random_pair(n, 0.06, 0.25, seed=2)
    got = st.xjaccard(as_csr(g0, n), as_csr(g1, n), max_len=4, c=0.1, block=7)
    for v in range(n):
        d0 = nx.single_source_shortest_path_length(g0, v, cutoff=4)
        d1 = nx.single_source_shortest_path_length(g1, v, cutoff=4)
        acc = 0.0
        for k in range(1, 5):
            s0 = {w for w, d in d0.items() if d == k}
            s1 = {w for w, d in d1.items() if d == k}
            acc += (len(s0 & s1) / len(s0 | s1) if s0 | s1 else 0.0) * 0.1**k * 0.9
            assert got[v, k - 1] == pytest.approx(acc, abs=1e-12), (v, k)
    # an unchanged graph is maximally similar to itself wherever a level is non-empty
    same = st.xjaccard(as_csr(g0, n), as_csr(g0, n), max_len=1)
    assert all(same[v, 0] == pytest.approx(0.09) for v in range(n) if g0.out_degree(v))


def exact_psimrank(g0: nx.DiGraph, g1: nx.DiGraph, n: int, max_len: int, c: float) -> np.ndarray:
    """E[c^τ 1(τ ≤ ℓ)] by enumerating every permutation of the n nodes at each step: the walk pair
    (x in g0, y in g1) moves to the in-neighbours of smallest rank; a Markov chain on pairs."""
    perms = list(itertools.permutations(range(n)))
    pred0 = {v: set(g0.predecessors(v)) for v in range(n)}
    pred1 = {v: set(g1.predecessors(v)) for v in range(n)}
    trans: dict[tuple[int, int], dict[object, float]] = {}
    for x in range(n):
        for y in range(n):
            if not pred0[x] or not pred1[y]:
                trans[(x, y)] = {}
                continue
            out: dict[object, float] = defaultdict(float)
            for perm in perms:
                rank = {node: i for i, node in enumerate(perm)}
                nx0, ny1 = min(pred0[x], key=rank.get), min(pred1[y], key=rank.get)
                out["met" if nx0 == ny1 else (nx0, ny1)] += 1 / len(perms)
            trans[(x, y)] = out
    result = np.zeros((n, max_len))
    for v in range(n):
        dist = {(v, v): 1.0}
        acc = 0.0
        for step in range(1, max_len + 1):
            nxt: dict[tuple[int, int], float] = defaultdict(float)
            for state, p in dist.items():
                for to, q in trans[state].items():
                    if to == "met":
                        acc += p * q * c**step
                    else:
                        nxt[to] += p * q
            dist = nxt
            result[v, step - 1] = acc
    return result


def test_psimrank_walks_estimate_the_exact_expectation():
    n = 6
    g0, g1 = random_pair(n, 0.45, 0.35, seed=5)
    exact = exact_psimrank(g0, g1, n, 4, 0.15)
    fingerprints = 6000
    est = st.psimrank_walks(as_csr(g0, n).T.tocsr(), as_csr(g1, n).T.tocsr(), range(fingerprints), 4, 0.15)
    est /= fingerprints
    # each fingerprint's value is in [0, c]: 5 standard errors at most c / (2 sqrt(F)) each
    assert np.abs(est - exact).max() < 5 * 0.15 / (2 * math.sqrt(fingerprints))
    assert exact.max() > 0.05  # the walks do meet in this graph


@pytest.mark.slow
def test_temporal_link_features_through_ray(ray_local):
    """Three snapshots; a host missing from the middle one is NaN where no pair has it, and the
    PSimRank of the Ray tasks (one, as the graph is small, or three) equals the local walks with the
    same seeds."""
    n = 25
    g0, g1 = random_pair(n, 0.15, 0.3, seed=7)
    _, g2 = random_pair(n, 0.15, 0.3, seed=8)
    names = [f"h{i:02d}.test" for i in range(n)]

    def snap(g, drop=()):
        hs = [h for i, h in enumerate(names) if i not in drop]
        ids = {h: k for k, h in enumerate(hs)}
        arcs = [(ids[names[a]], ids[names[b]]) for a, b in g.edges if names[a] in ids and names[b] in ids]
        return hs, np.array([a for a, _ in arcs]), np.array([b for _, b in arcs])

    hosts, sets = st.temporal_link_features([snap(g0), snap(g1, drop={3}), snap(g2)], fingerprints=64, seed=1)
    assert hosts == names
    assert set(sets) == {"growth_death", "xjaccard", "psimrank"}
    for feats in sets.values():
        for name, values in feats.items():
            assert values.shape == (n,)
            assert np.isnan(values[3]), name  # in no consecutive pair
    a0, a1 = (st.align([snap(g0), snap(g1, drop={3})])[1][i] for i in (0, 1))
    walks = st.psimrank_walks(a0.T.tocsr(), a1.T.tocsr(), [1 * 1_000_003 + f for f in range(64)], 4, 0.15) / 64
    pair0 = st.psimrank(a0, a1, 64, seed=1)  # (a graph this small: one task)
    assert np.allclose(pair0, walks)
    assert np.allclose(st.psimrank(a0, a1, 64, seed=1, tasks=3, work_per_task=1), walks)  # split over three
    filled = st.fill_missing(sets["psimrank"]["log PSimIn2/PSimIn1"], "log PSimIn2/PSimIn1")
    assert np.isfinite(filled).all() and filled[3] == 0.0  # log of "no change"
    assert st.fill_missing(sets["psimrank"]["PSimIn2/PSimIn1"], "PSimIn2/PSimIn1")[3] == 1.0


def test_temporal_content_features_match_the_paper_formulas():
    """Ave, AveDiff, Dev, DevDiff, Decay (§3.2) against a dense computation written from the
    equations, on random virtual documents over three snapshots; a host in one snapshot is missing."""
    import math

    from raycrawl.tasks.spam_temporal_content import K1, B, temporal_content_features

    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    snaps = []
    for t in range(3):
        snap = {}
        for h in range(12):
            if h == 5 and t != 1:
                continue  # host 5 only in the middle snapshot
            snap[f"h{h}"] = dict(Counter(rng.choices(words[: 10 + 3 * h], k=20 + h)))
        snaps.append(snap)
    hosts, vocab, groups, missing = temporal_content_features(snaps, max_terms=15, min_df=0.1, max_df=0.5, decay=0.5)
    assert hosts == sorted({h for s in snaps for h in s}) and len(vocab) == 15
    n = len(hosts)
    docs = [(t, h) for t, s in enumerate(snaps) for h in s]
    for term in vocab:  # the vocabulary rule itself
        df = sum(1 for t, h in docs if term in snaps[t][h])
        assert 0.1 * len(docs) <= df <= 0.5 * len(docs)
    tw = np.zeros((3, n, len(vocab)))
    for t, snap in enumerate(snaps):
        avdl = np.mean([sum(c.values()) for c in snap.values()])
        for j, term in enumerate(vocab):
            nt = sum(1 for c in snap.values() if term in c)
            idf = math.log((n - nt + 0.5) / (nt + 0.5))
            for i, h in enumerate(hosts):
                if h in snap:
                    tf = snap[h].get(term, 0)
                    k = K1 * ((1 - B) + B * sum(snap[h].values()) / avdl)
                    tw[t, i, j] = idf * (K1 + 1) * tf / (k + tf)
    ave = tw.mean(axis=0)
    d = np.abs(np.diff(tw, axis=0))
    want = {"Ave": ave, "AveDiff": d.mean(axis=0), "Dev": ((tw - ave) ** 2).sum(axis=0) / 2,
            "DevDiff": ((d - d.mean(axis=0)) ** 2).sum(axis=0) / 1,
            "Decay": sum(0.5 * math.exp(-0.5 * (3 - T)) * tw[T - 1] for T in (1, 2, 3))}
    assert missing.tolist() == [h == "h5" for h in hosts]
    for g, m in want.items():
        m[missing] = 0.0
        assert np.allclose(groups[g].toarray(), m, atol=1e-9), g
