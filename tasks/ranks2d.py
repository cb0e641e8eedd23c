"""PageRank and CheiRank indexes K, K*, the 2DRank K2 and the correlator κ (seed 003, part 1).

- ``K(i)``: position of node ``i`` when nodes are sorted by decreasing PageRank ``P``; ``K*(i)`` the
  same for the CheiRank ``P*`` (PageRank of the reversed graph). Both are 1-based permutations.
  **Tie rule**: equal probabilities are ordered by increasing node id (a stable sort), so that an
  exact tie (e.g. nodes 60595 and 60597 of cnr-2000) gets a deterministic order.
- ``K2(i)`` (2DRank): nodes are counted in order of their appearance on the ribs of the squares
  ``[1, m] × [1, m]`` of the (K, K*) plane as the size ``m`` grows from 1 to N. Node ``i`` appears on
  square ``m(i) = max(K(i), K*(i))``. At most two nodes appear on each square (the one with ``K = m``
  and the one with ``K* = m``); **tie rule**: the one nearer to the corner on its rib's far end, i.e. with
  the smaller other coordinate ``min(K, K*)``, comes first; if both have the same other coordinate
  (points ``(m, s)`` and ``(s, m)``), the PageRank rib wins — the node with ``K* = m`` (smaller K) first.
  So ``K2`` is the rank by the key ``(max(K, K*), min(K, K*), K)``, which is unique since K is a permutation.
- ``κ = N Σ_i P(i) P*(i) − 1`` (eq. 3): 0 when P and P* are uncorrelated, > 0 when popular nodes
  are also communicative.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from raycrawl.tasks.pagerank import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    LinkMatrix,
    PageRankResult,
    distributed_pagerank,
    pagerank,
)

log = logging.getLogger(__name__)


def rank_indices(p: np.ndarray) -> np.ndarray:
    """1-based rank of each node by decreasing ``p``; ties by increasing node id."""
    order = np.argsort(-np.asarray(p, dtype=np.float64), kind="stable")
    k = np.empty(len(order), dtype=np.int64)
    k[order] = np.arange(1, len(order) + 1)
    return k


def two_d_rank(k: np.ndarray, kstar: np.ndarray) -> np.ndarray:
    """2DRank ``K2`` from the 1-based permutations ``K`` and ``K*`` (tie rule in the module docstring)."""
    k = np.asarray(k, dtype=np.int64)
    kstar = np.asarray(kstar, dtype=np.int64)
    assert k.shape == kstar.shape, "K and K* must have the same length"
    order = np.lexsort((k, np.minimum(k, kstar), np.maximum(k, kstar)))
    k2 = np.empty(len(order), dtype=np.int64)
    k2[order] = np.arange(1, len(order) + 1)
    return k2


def kappa(p: np.ndarray, pstar: np.ndarray) -> float:
    """The correlator ``κ = N Σ P(i) P*(i) − 1`` of two probability vectors."""
    p = np.asarray(p, dtype=np.float64)
    pstar = np.asarray(pstar, dtype=np.float64)
    return float(len(p) * np.dot(p, pstar) - 1.0)


@dataclass
class RankSet:
    """Everything ``raycrawl rank`` computes for one graph."""

    pagerank: PageRankResult
    cheirank: PageRankResult
    K: np.ndarray
    Kstar: np.ndarray
    K2: np.ndarray
    kappa: float
    alpha: float
    tol: float

    @property
    def num_nodes(self) -> int:
        return len(self.K)


def compute_ranks(
    matrix: LinkMatrix,
    alpha: float = DEFAULT_ALPHA,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    personalization: np.ndarray | None = None,
    distributed: bool = False,
    num_blocks: int = 2,
    threads: int | None = None,
) -> RankSet:
    """PageRank and CheiRank of ``matrix`` (both personalized by the same vector if given), K, K*, K2, κ.

    ``distributed=True`` runs each power iteration as Ray tasks (Ray must be initialised); otherwise
    ``threads`` sets the kernel threads (default ``auto_threads()``; the result does not depend on it).
    """
    kwargs = dict(alpha=alpha, tol=tol, max_iter=max_iter, personalization=personalization)
    if distributed:
        pr = distributed_pagerank(matrix, num_blocks=num_blocks, **kwargs)
        cr = distributed_pagerank(matrix.reversed(), num_blocks=num_blocks, **kwargs)
    else:
        pr = pagerank(matrix, threads=threads, **kwargs)
        cr = pagerank(matrix.reversed(), threads=threads, **kwargs)
    k = rank_indices(pr.vector)
    ks = rank_indices(cr.vector)
    rs = RankSet(pr, cr, k, ks, two_d_rank(k, ks), kappa(pr.vector, cr.vector), alpha, tol)
    log.info(
        "ranks: N=%d PageRank %d it, CheiRank %d it, kappa=%.4f", rs.num_nodes, pr.iterations, cr.iterations, rs.kappa
    )
    return rs
