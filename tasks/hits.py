"""Personalized HITS with a supersource (seed 003, part 3, equations 7–8).

The supersource is an extra node linked to every node ``v`` with weight ``p(v)`` (the personalization,
normalised to sum 1, zeros allowed); each iteration it distributes the fixed amount ``c`` of score::

    â(v) = Σ_{u→v} w(uv)·h(u) + c·p(v),   a = â / ‖â‖∞        (7)
    ĥ(v) = Σ_{v→u} w(vu)·a(u) + c·p(v),   h = ĥ / ‖ĥ‖∞        (8)

Equation (8) uses the authorities ``a`` just computed by (7). Arcs have unit weight (a crawl's graph
is unweighted). With ``c = 0`` this is Kleinberg's HITS; the supersource damps topic drift.
Iteration stops when both vectors move less than ``tol`` in L∞ norm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from raycrawl.tasks.pagerank import LinkMatrix, gather_sum, teleport_vector

log = logging.getLogger(__name__)


@dataclass
class HitsResult:
    """Authority and hub vectors, each scaled so that its maximum is 1."""

    authority: np.ndarray
    hub: np.ndarray
    iterations: int
    residuals: list[float] = field(default_factory=list)
    converged: bool = True


def personalized_hits(
    matrix: LinkMatrix,
    c: float = 1.0,
    personalization: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> HitsResult:
    """Authorities and hubs by equations (7)–(8); uniform personalization when None.

    ``c`` ≥ 0 is the importance of the supersource. Raises ValueError on negative ``c`` or a bad
    personalization vector. A graph without arcs and ``c = 0`` has no scores: all zeros are returned.
    """
    if c < 0:
        raise ValueError(f"supersource weight c must be >= 0, got {c}")
    n = matrix.num_nodes
    p = teleport_vector(n, personalization) if n else np.zeros(0)
    succ = matrix.reversed()  # its predecessor lists are our successor lists
    a = np.ones(n)
    h = np.ones(n)
    a_hat = np.empty(n)
    h_hat = np.empty(n)
    residuals: list[float] = []
    converged = False
    for _ in range(max_iter):
        gather_sum(matrix.pred_indptr, matrix.pred_indices, h, a_hat)
        a_hat += c * p
        a_new = _max_normalised(a_hat)
        gather_sum(succ.pred_indptr, succ.pred_indices, a_new, h_hat)
        h_hat += c * p
        h_new = _max_normalised(h_hat)
        res = max(_linf(a_new - a), _linf(h_new - h))
        residuals.append(res)
        a, h = a_new, h_new
        if res < tol:
            converged = True
            break
    if not converged and n:
        log.warning("HITS did not converge in %d iterations (L∞ change %.3g)", max_iter, residuals[-1])
    return HitsResult(a, h, len(residuals), residuals, converged)


def _max_normalised(x: np.ndarray) -> np.ndarray:
    m = x.max() if len(x) else 0.0
    return x / m if m > 0 else np.zeros_like(x)


def _linf(x: np.ndarray) -> float:
    return float(np.abs(x).max()) if len(x) else 0.0
