"""Temporal link features of web spam over two or more host-graph snapshots (seed 003, §3.1).

The snapshots are host graphs of crawls of the same web at successive times (websim ``--epoch K``,
each crawled by ``raycrawl crawl``); a host is the same node in every snapshot it appears in
(:func:`align`). For two snapshots t0 < t1, per host ``a``:

* §3.1.1 (Shen et al.): in-link death and growth rates
  ``IDR = (|I0| − |I0 ∩ I1|) / |I0|``, ``IGR = (|I1| − |I0 ∩ I1|) / |I0|``, the same on out-links
  (ODR, OGR); their mean and variance over the host's in-neighbours (``IDRMean``, ``IDRVar``, …);
  the change rate of the clustering coefficient ``CRCC = (CC1 − CC0) / CC0`` with CC as the paper
  prints it, ``|{(b, c) ∈ G(t): b, c ∈ Γ(a)}| / |Γ(a)|``; and the derived products and ratios
  (``IGR*IDR``, ``IGR/IDR``, ``IGRMean/IGR`` …, the same for out-links).
* §3.1.3 XJaccard along time, ``XJac_ℓ(v) = Σ_{k=1..ℓ} |Γ_k0 ∩ Γ_k1| / |Γ_k0 ∪ Γ_k1| · c^k (1−c)``
  with Γ_k the hosts at distance exactly k, ℓ = 1..4, c = 0.1, on out-links and on in-links
  (the transposed graph); computed exactly (breadth-first distances), with the neighbour mean and
  variance and the derived ratios ℓ/(ℓ−1), their logarithms, and the log of their min, max, mean.
  An empty Γ_k in both snapshots contributes 0 (no evidence of sameness).
* §3.1.4 PSimRank along time: two random walks start at ``v``, one in each snapshot, and step
  backwards along in-links (out-links for the transposed version); at step ℓ both move to their
  in-neighbour of smallest rank under one random permutation σ_ℓ shared by the two snapshots and
  every start node, so that walks at the same host meet with the Jaccard probability of its two
  in-neighbourhoods. ``PSim_ℓ(v) = E[c^τ · 1(τ ≤ ℓ)]``, τ the first step at which the walks are at
  the same host, c = 0.15, estimated from ``fingerprints`` walk pairs per host, as Ray tasks
  (:func:`psimrank`). Neighbour mean and variance and derived features as for XJaccard.

With more than two snapshots every feature is computed for each consecutive pair and averaged over
the pairs where it is defined. **Missing values** (the paper's §4): a host seen in fewer than two
snapshots, or whose denominator is 0 in every pair, gets NaN; :func:`fill_missing` gives the
classifiers the paper's kind of defaults (0 for rates and similarities, 1 for ratios).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

log = logging.getLogger(__name__)

XJAC_C = 0.1
PSIM_C = 0.15
MAX_LEN = 4
# A Ray task costs ~1 CPU-s before it walks (a worker process importing numpy and scipy); walking
# costs 50–100 ns per fingerprint × (hosts + arcs) (measured, 1k–100k hosts): a task is given at
# least ~1–2 s of walks, so a small host graph is walked by one task, not four idle starts.
PSIM_WORK_PER_TASK = 20_000_000


# ---- snapshots -----------------------------------------------------------------------------------


def align(graphs: Sequence[tuple[list[str], np.ndarray, np.ndarray]]) -> tuple[list[str], list[sparse.csr_matrix],
                                                                             np.ndarray]:
    """Host graphs (hosts, src, dst) → (the union of hosts, sorted; one n×n 0/1 CSR adjacency per
    snapshot on those ids; ``present[t, i]``: host i was crawled in snapshot t)."""
    hosts = sorted({h for hs, _, _ in graphs for h in hs})
    ids = {h: i for i, h in enumerate(hosts)}
    n = len(hosts)
    mats, present = [], np.zeros((len(graphs), n), dtype=bool)
    for t, (hs, src, dst) in enumerate(graphs):
        remap = np.array([ids[h] for h in hs], dtype=np.int64)
        present[t, remap] = True
        s, d = remap[np.asarray(src, dtype=np.int64)], remap[np.asarray(dst, dtype=np.int64)]
        keep = s != d
        a = sparse.csr_matrix((np.ones(int(keep.sum()), dtype=np.float64), (s[keep], d[keep])), shape=(n, n))
        a.data[:] = 1.0  # duplicate arcs summed → 1
        mats.append(a)
    return hosts, mats, present


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(num.shape, np.nan)
    ok = den != 0
    out[ok] = num[ok] / den[ok]
    return out


def _neighbour_stats(a: sparse.csr_matrix, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of ``x`` over each row's neighbours in ``a`` (NaN values left out; NaN
    when no neighbour has a value)."""
    have = ~np.isnan(x)
    xv = np.where(have, x, 0.0)
    cnt = a @ have.astype(np.float64)
    s1, s2 = a @ xv, a @ (xv * xv)
    mean = _ratio(s1, cnt)
    var = _ratio(s2, cnt) - mean * mean
    return mean, np.maximum(var, 0.0, where=~np.isnan(var), out=var)


# ---- §3.1.1 growth and death rates, CRCC -----------------------------------------------------------


def clustering(a: sparse.csr_matrix) -> np.ndarray:
    """CC(a) as seed 003 prints it: arcs among a's out-neighbours / |Γ(a)| (NaN without out-links)."""
    among = np.asarray((a @ a).multiply(a).sum(axis=1)).ravel()
    return _ratio(among, np.asarray(a.sum(axis=1)).ravel())


def growth_death(a0: sparse.csr_matrix, a1: sparse.csr_matrix) -> dict[str, np.ndarray]:
    """§3.1.1 features of every host between snapshots a0 → a1 (NaN where undefined)."""
    f: dict[str, np.ndarray] = {}
    both = a0.multiply(a1).tocsr()
    for side, m0, m1, mb in (("I", a0.T.tocsr(), a1.T.tocsr(), both.T.tocsr()), ("O", a0, a1, both)):
        d0 = np.asarray(m0.sum(axis=1)).ravel()
        d1 = np.asarray(m1.sum(axis=1)).ravel()
        kept = np.asarray(mb.sum(axis=1)).ravel()
        f[f"{side}DR"] = _ratio(d0 - kept, d0)
        f[f"{side}GR"] = _ratio(d1 - kept, d0)
    into = a1.T.tocsr()  # in-neighbours in the later snapshot
    for name in ("IDR", "IGR", "ODR", "OGR"):
        f[name + "Mean"], f[name + "Var"] = _neighbour_stats(into, f[name])
    f["CRCC"] = _ratio(clustering(a1) - clustering(a0), clustering(a0))
    for s in ("I", "O"):
        g, d = f[f"{s}GR"], f[f"{s}DR"]
        gm, gv, dm, dv = f[f"{s}GRMean"], f[f"{s}GRVar"], f[f"{s}DRMean"], f[f"{s}DRVar"]
        f[f"{s}GR*{s}DR"] = g * d
        f[f"{s}GR/{s}DR"] = _ratio(g, d)
        f[f"{s}GRMean/{s}GR"] = _ratio(gm, g)
        f[f"{s}GRVar/{s}GR"] = _ratio(gv, g)
        f[f"{s}DRMean/{s}DR"] = _ratio(dm, d)
        f[f"{s}DRVar/{s}DR"] = _ratio(dv, d)
        f[f"{s}GRMean*{s}DRMean"] = gm * dm
        f[f"{s}GRMean/{s}DRMean"] = _ratio(gm, dm)
        f[f"{s}GRVar*{s}DRVar"] = gv * dv
        f[f"{s}GRVar/{s}DRVar"] = _ratio(gv, dv)
    return f


# ---- §3.1.3 XJaccard along time --------------------------------------------------------------------


def xjaccard(a0: sparse.csr_matrix, a1: sparse.csr_matrix, max_len: int = MAX_LEN, c: float = XJAC_C,
             block: int = 256) -> np.ndarray:
    """``XJac_ℓ`` for ℓ = 1..max_len of every host (array n × max_len), exactly: breadth-first
    distances from blocks of sources in both snapshots, compared level by level."""
    n = a0.shape[0]
    out = np.zeros((n, max_len))
    for lo in range(0, n, block):
        idx = np.arange(lo, min(n, lo + block))
        d0 = csgraph.shortest_path(a0, method="D", unweighted=True, indices=idx)
        d1 = csgraph.shortest_path(a1, method="D", unweighted=True, indices=idx)
        acc = np.zeros(len(idx))
        for k in range(1, max_len + 1):
            g0, g1 = d0 == k, d1 == k
            inter, union = (g0 & g1).sum(axis=1), (g0 | g1).sum(axis=1)
            acc += np.where(union > 0, inter / np.maximum(union, 1), 0.0) * c**k * (1 - c)
            out[idx, k - 1] = acc
    return out


# ---- §3.1.4 PSimRank along time --------------------------------------------------------------------


def _min_neighbour(m: sparse.csr_matrix, rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per row of ``m`` (rows: nodes, columns: the neighbours walked to), the neighbour of smallest
    ``rank``; -1 for a row without neighbours. ``order`` is the inverse of ``rank``."""
    n = m.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    nonempty = np.diff(m.indptr) > 0
    if m.nnz:
        mins = np.minimum.reduceat(rank[m.indices], m.indptr[:-1][nonempty])
        out[nonempty] = order[mins]
    return out


def psimrank_walks(m0: sparse.csr_matrix, m1: sparse.csr_matrix, seeds: Sequence[int], max_len: int = MAX_LEN,
                   c: float = PSIM_C) -> np.ndarray:
    """Sum over the fingerprints of ``seeds`` (one walk pair per host each) of c^τ·1(τ ≤ ℓ), as an
    n × max_len array. ``m0``/``m1``: rows are hosts, columns the hosts a walk may step to (the
    transposed adjacency for in-links)."""
    n = m0.shape[0]
    total = np.zeros((n, max_len))
    for seed in seeds:
        rng = np.random.default_rng(seed)
        x = np.arange(n)
        y = np.arange(n)
        alive = np.ones(n, dtype=bool)
        met_at = np.zeros(n, dtype=np.int64)  # 0: not met yet
        for step in range(1, max_len + 1):
            order = rng.permutation(n)
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n)
            nx0, ny1 = _min_neighbour(m0, rank, order), _min_neighbour(m1, rank, order)
            walking = alive & (met_at == 0)
            nx = np.where(walking, nx0[x], -1)
            ny = np.where(walking, ny1[y], -1)
            alive = walking & (nx >= 0) & (ny >= 0)
            met = alive & (nx == ny)
            met_at[met] = step
            x, y = np.where(alive, nx, 0), np.where(alive, ny, 0)
            alive &= ~met
        for k in range(1, max_len + 1):
            hit = (met_at >= 1) & (met_at <= k)
            total[hit, k - 1] += c ** met_at[hit]
    return total


def psimrank(a0: sparse.csr_matrix, a1: sparse.csr_matrix, fingerprints: int = 100, max_len: int = MAX_LEN,
             c: float = PSIM_C, seed: int = 0, transposed: bool = False, tasks: int = 4,
             work_per_task: int = PSIM_WORK_PER_TASK) -> np.ndarray:
    """``PSim_ℓ`` of every host (n × max_len), estimated from ``fingerprints`` walk pairs per host,
    split over at most ``tasks`` Ray tasks of at least ``work_per_task`` fingerprints × (hosts +
    arcs) each (the snapshots go to the object store once). In-links are walked (out-links if
    ``transposed``)."""
    import ray

    from raycrawl.tasks.spam_link_features import ensure_ray

    ensure_ray()
    m0, m1 = (a0, a1) if transposed else (a0.T.tocsr(), a1.T.tocsr())
    refs = (ray.put(m0), ray.put(m1))
    remote = ray.remote(num_cpus=1)(psimrank_walks)
    seeds = [seed * 1_000_003 + f for f in range(fingerprints)]
    work = fingerprints * (m0.shape[0] + m0.nnz + m1.nnz)
    tasks = max(1, min(tasks, -(-work // max(1, work_per_task))))
    parts = [seeds[i::tasks] for i in range(tasks) if seeds[i::tasks]]
    total = sum(ray.get([remote.remote(*refs, part, max_len, c) for part in parts]))
    return total / fingerprints


# ---- all features ------------------------------------------------------------------------------------


def _similarity_features(name: str, sim: np.ndarray, neighbours: sparse.csr_matrix) -> dict[str, np.ndarray]:
    f: dict[str, np.ndarray] = {}
    ratios = []
    for k in range(sim.shape[1]):
        f[f"{name}{k + 1}"] = sim[:, k]
        f[f"{name}{k + 1}Mean"], f[f"{name}{k + 1}Var"] = _neighbour_stats(neighbours, sim[:, k])
        if k:
            r = _ratio(sim[:, k], sim[:, k - 1])
            ratios.append(r)
            f[f"{name}{k + 1}/{name}{k}"] = r
            with np.errstate(divide="ignore", invalid="ignore"):
                f[f"log {name}{k + 1}/{name}{k}"] = np.log(r)
    if ratios:
        stack = np.vstack(ratios)
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            for agg in ("min", "max", "mean"):
                f[f"log {agg} {name} ratio"] = np.log(getattr(np, "nan" + agg)(stack, axis=0))
    return f


def _pair_features(a0: sparse.csr_matrix, a1: sparse.csr_matrix, fingerprints: int, max_len: int, seed: int,
                   timing: dict[str, float]) -> dict[str, dict[str, np.ndarray]]:
    out_nb, in_nb = a1, a1.T.tocsr()  # the neighbours of the later snapshot
    sets: dict[str, dict[str, np.ndarray]] = {}
    t0 = time.perf_counter()
    sets["growth_death"] = growth_death(a0, a1)
    t1 = time.perf_counter()
    sets["xjaccard"] = {**_similarity_features("XJacOut", xjaccard(a0, a1, max_len), out_nb),
                        **_similarity_features("XJacIn", xjaccard(a0.T.tocsr(), a1.T.tocsr(), max_len), in_nb)}
    t2 = time.perf_counter()
    sets["psimrank"] = {
        **_similarity_features("PSimIn", psimrank(a0, a1, fingerprints, max_len, seed=seed), in_nb),
        **_similarity_features("PSimOut", psimrank(a0, a1, fingerprints, max_len, seed=seed, transposed=True), out_nb)}
    for name, dt in (("growth_death", t1 - t0), ("xjaccard", t2 - t1), ("psimrank", time.perf_counter() - t2)):
        timing[name] = timing.get(name, 0.0) + dt
    return sets


def temporal_link_features(graphs: Sequence[tuple[list[str], np.ndarray, np.ndarray]], fingerprints: int = 100,
                           seed: int = 0, max_len: int = MAX_LEN, seconds: dict[str, float] | None = None,
                           ) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    """(hosts, {feature set: {feature: values}}) over the snapshots ``graphs`` in time order. Sets:
    ``growth_death`` (§3.1.1), ``xjaccard`` (§3.1.3), ``psimrank`` (§3.1.4). ``seconds``, if given,
    receives each set's computing time (the paper's §6 compares them)."""
    if len(graphs) < 2:
        raise ValueError("temporal features need at least two snapshots")
    hosts, mats, present = align(graphs)
    timing = seconds if seconds is not None else {}
    pairs: list[dict[str, dict[str, np.ndarray]]] = []
    for t in range(len(mats) - 1):
        sets = _pair_features(mats[t], mats[t + 1], fingerprints, max_len, seed + t, timing)
        both = present[t] & present[t + 1]
        for feats in sets.values():
            for k, v in feats.items():
                feats[k] = np.where(both, v, np.nan)
        pairs.append(sets)
    merged: dict[str, dict[str, np.ndarray]] = {}
    for name in pairs[0]:
        merged[name] = {}
        for k in pairs[0][name]:
            with warnings.catch_warnings():  # all-NaN columns (missing in every pair) stay NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                merged[name][k] = np.nanmean(np.vstack([p[name][k] for p in pairs]), axis=0)
    return hosts, merged


def fill_missing(values: np.ndarray, name: str) -> np.ndarray:
    """The paper's defaults for classifiers that take no missing values, by kind of feature: a
    ratio ("/" in the name) 1 and its logarithm 0 (no change), anything else 0; ±inf (a log of 0)
    as the finite extreme."""
    default = 1.0 if "/" in name and not name.startswith("log ") else 0.0
    v = np.where(np.isnan(values), default, values)
    finite = v[np.isfinite(v)]
    lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
    return np.clip(np.where(np.isposinf(v), hi, np.where(np.isneginf(v), lo, v)), lo, hi)
