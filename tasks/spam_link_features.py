"""Link features of web spam over the host graph (seed 003 part 2, "public link-based" set [7]).

The host graph has one node per crawled host and an arc ``a → b`` when some fetched page of ``a``
links to a page of crawled host ``b ≠ a`` (duplicates merged). Per host:

================== =============================================================================
feature            meaning
================== =============================================================================
indeg, outdeg      distinct linking / linked hosts
reciprocity        fraction of out-neighbours that link back (link farms link each other)
pagerank           host-graph PageRank (α = 0.85), and ``log_pagerank``
trustrank          PageRank personalized on the trusted seed hosts (TrustRank), ``trust_ratio`` =
                   trustrank / pagerank (spam collects PageRank without trust)
trunc_pr_T         truncated PageRank (Becchetti et al.): PageRank without the contribution of
                   paths of length ≤ T, T = 1..4, and ``trunc_ratio_T`` = trunc_pr_T / pagerank
supporters_d       estimated hosts reaching this host in ≤ d steps, d = 1..4 (HyperLogLog
                   counters, 64 registers, propagated along arcs as in ANF / HyperANF)
supp_growth_d      supporters_d / supporters_{d-1}
assort_in/out      indeg (outdeg) / mean indeg (outdeg) of the in- (out-) neighbours
pr_per_indeg       pagerank / (indeg + 1)
================== =============================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from raycrawl.storage.link_records import iter_link_records

log = logging.getLogger(__name__)

HLL_REGISTERS = 64
ALPHA = 0.85


def ensure_ray() -> None:
    """Start a small local Ray if the caller has not (2 CPUs, no dashboard)."""
    from raycrawl.ray_start import start_ray

    start_ray()


def host_graph(crawl_dir: str | Path, records: Iterable[dict] | None = None
               ) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """(hosts sorted, src, dst, hosts in first-fetch order) of the crawl's host graph (of
    ``records`` if given: one pass of a periodic crawl, storage/crawl_epochs.py)."""
    from raycrawl.policies.spam_page import host_name

    first: dict[str, float] = {}
    arcs: set[tuple[str, str]] = set()
    for rec in iter_link_records(crawl_dir) if records is None else records:
        url = rec.url
        if not url:
            continue
        a = host_name(url)
        t = float(rec.time)
        if a not in first or t < first[a]:
            first[a] = t
        for v in rec.links:
            b = host_name(v)
            if b != a:
                arcs.add((a, b))
    hosts = sorted(first)
    ids = {h: i for i, h in enumerate(hosts)}
    pairs = [(ids[a], ids[b]) for a, b in arcs if b in ids]
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    return hosts, src, dst, sorted(first, key=first.__getitem__)


def _propagate(x: np.ndarray, src: np.ndarray, dst: np.ndarray, outdeg: np.ndarray) -> np.ndarray:
    """One step of the random surfer: mass at ``a`` split evenly among its out-neighbours."""
    y = np.zeros_like(x)
    share = np.where(outdeg > 0, x / np.maximum(outdeg, 1), 0.0)
    np.add.at(y, dst, share[src])
    return y


def truncated_pageranks(src: np.ndarray, dst: np.ndarray, n: int, max_t: int = 4, steps: int = 60) -> tuple[np.ndarray, list[np.ndarray]]:
    """(PageRank as the series Σ_t (1-α) α^t P^t v, [its tail without paths of length ≤ T for T = 1..max_t]).

    Dangling mass is dropped rather than teleported (the series form); the result is normalised.
    """
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    x = np.full(n, (1 - ALPHA) / n)
    terms = [x]
    for _ in range(steps):
        x = ALPHA * _propagate(x, src, dst, outdeg)
        terms.append(x)
    total = np.sum(terms, axis=0)
    norm = total.sum() or 1.0
    tails = [np.sum(terms[t + 1:], axis=0) / norm for t in range(1, max_t + 1)]
    return total / norm, tails


def _hll_init(n: int, m: int = HLL_REGISTERS) -> np.ndarray:
    import xxhash

    reg = np.zeros((n, m), dtype=np.uint8)
    for i in range(n):
        h = xxhash.xxh3_64_intdigest(i.to_bytes(8, "little"))
        j, w = h % m, h // m
        rank = 1
        while w & 1 == 0 and rank < 58:
            rank += 1
            w >>= 1
        reg[i, j] = rank
    return reg


def hll_estimate(reg: np.ndarray) -> np.ndarray:
    """HyperLogLog cardinality estimate of each row of registers (linear counting when small)."""
    m = reg.shape[1]
    alpha_m = 0.709 if m == 64 else 0.7213 / (1 + 1.079 / m)
    raw = alpha_m * m * m / np.sum(np.power(2.0, -reg.astype(np.float64)), axis=1)
    zeros = (reg == 0).sum(axis=1)
    small = (raw <= 2.5 * m) & (zeros > 0)
    lin = m * np.log(m / np.maximum(zeros, 1))
    return np.where(small, lin, raw)


def supporters(src: np.ndarray, dst: np.ndarray, n: int, max_d: int = 4) -> list[np.ndarray]:
    """Estimated number of hosts (itself included) reaching each host in ≤ d steps, d = 1..max_d."""
    reg = _hll_init(n)
    out = []
    for _ in range(max_d):
        new = reg.copy()
        np.maximum.at(new, dst, reg[src])
        reg = new
        out.append(hll_estimate(reg))
    return out


def link_features(crawl_dir: str | Path, trusted: list[str] | None = None, n_trusted: int = 10) -> list[dict]:
    """One row of link features per crawled host. ``trusted`` hosts seed TrustRank; by default the
    ``n_trusted`` hosts fetched first (the crawl's seeds: a crawl starts from hand-picked hosts)."""
    from raycrawl.tasks.pagerank import LinkMatrix, csr_from_edges, pagerank

    hosts, src, dst, by_time = host_graph(crawl_dir)
    n = len(hosts)
    if n == 0:
        return []
    ids = {h: i for i, h in enumerate(hosts)}
    indeg = np.bincount(dst, minlength=n).astype(np.float64)
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    arcset = set(zip(src.tolist(), dst.tolist(), strict=True))
    recip = np.zeros(n)
    for a, b in arcset:
        if (b, a) in arcset:
            recip[a] += 1
    recip = np.where(outdeg > 0, recip / np.maximum(outdeg, 1), 0.0)
    indptr, indices = csr_from_edges(src, dst, n)
    matrix = LinkMatrix.from_successors(indptr, indices)
    pr = pagerank(matrix, alpha=ALPHA).vector
    seeds = [h for h in (trusted or by_time[:n_trusted]) if h in ids]
    if not seeds:
        raise ValueError("none of the trusted hosts was crawled")
    pers = np.zeros(n)
    pers[[ids[h] for h in seeds]] = 1.0
    tr = pagerank(matrix, alpha=ALPHA, personalization=pers).vector
    _, tails = truncated_pageranks(src, dst, n)
    supp = supporters(src, dst, n)
    # Mean degree of neighbours (assortativity); hosts without neighbours get ratio 1.
    nin_sum = np.zeros(n)
    np.add.at(nin_sum, dst, indeg[src])
    nout_sum = np.zeros(n)
    np.add.at(nout_sum, src, outdeg[dst])
    assort_in = np.where(indeg > 0, indeg / np.maximum(nin_sum / np.maximum(indeg, 1), 1e-9), 1.0)
    assort_out = np.where(outdeg > 0, outdeg / np.maximum(nout_sum / np.maximum(outdeg, 1), 1e-9), 1.0)
    rows = []
    for h, i in ids.items():
        row = {"host": h, "indeg": indeg[i], "outdeg": outdeg[i], "reciprocity": recip[i], "pagerank": pr[i] * n,
               "log_pagerank": float(np.log(pr[i] * n)), "trustrank": tr[i] * n,
               "trust_ratio": tr[i] / pr[i], "pr_per_indeg": pr[i] * n / (indeg[i] + 1),
               "assort_in": assort_in[i], "assort_out": assort_out[i]}
        for t, tail in enumerate(tails, start=1):
            row[f"trunc_pr_{t}"] = tail[i] * n
            row[f"trunc_ratio_{t}"] = tail[i] / max(pr[i], 1e-300)
        prev = 1.0
        for d, s in enumerate(supp, start=1):
            row[f"supporters_{d}"] = s[i]
            row[f"supp_growth_{d}"] = s[i] / max(prev, 1.0)
            prev = s[i]
        rows.append({k: (float(v) if k != "host" else v) for k, v in row.items()})
    log.info("link features: %d hosts, %d host arcs, %d trusted", n, len(src), len(seeds))
    return rows
