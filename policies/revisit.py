"""When to visit a page again: a periodic crawl's schedule (seed 001's "periodic" crawler).

Time is counted in **passes** (``raycrawl crawl --revisit`` runs one; each pass is an epoch of the
crawl). A page's history is the passes it was visited in and, for each visit after the first,
whether the page had changed since the visit before (:class:`Visit`). Its change rate λ (changes
per pass, the page modelled as a Poisson process) is estimated from that history with the
estimators of Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT 3(3), 2003:

* every interval between visits the same length I (the usual case: a page revisited each pass):
  their bias-reduced estimator for regular access, ``λ̂ = −log((n − X + 0.5) / (n + 0.5)) / I``
  with n intervals of which X saw a change (finite even when X = n, and nearly unbiased);
* intervals of different lengths (the schedule below stretches them): their maximum-likelihood
  estimator for irregular access, the λ solving
  ``Σ_{changed} t_i / (e^{λ t_i} − 1) = Σ_{unchanged} t_j``; it has no finite root when every
  interval or none saw a change, and then the bias-reduced estimator is used with I the mean
  interval.

The next visit is 1/λ̂ passes after the last one (proportional to the estimated rate, so pages that
change more often are visited more often), kept within [``min_interval``, ``max_interval``] and
at most twice the interval before it: a page seen unchanged once is not banished for
``max_interval`` passes on one observation (Heritrix's adaptive revisit stretches its wait the same
way). A page visited once has no interval yet and is visited again at the next pass.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_INTERVAL = 1
MAX_INTERVAL = 8


@dataclass(frozen=True, slots=True)
class Visit:
    """One visit of a page: the pass it happened in and whether the page had changed since the
    visit before (None: not known — the first visit, or a visit without an answer to compare)."""

    epoch: int
    changed: bool | None


def regular_estimate(n: int, changes: int, interval: float) -> float:
    """Cho & Garcia-Molina's bias-reduced estimator of λ from ``n`` intervals of length
    ``interval``, ``changes`` of which saw a change."""
    assert n > 0 and 0 <= changes <= n and interval > 0
    return -math.log((n - changes + 0.5) / (n + 0.5)) / interval


def mle_estimate(changed: Sequence[float], unchanged: Sequence[float]) -> float | None:
    """Cho & Garcia-Molina's maximum-likelihood λ for irregular intervals (lengths of the
    intervals that saw a change, of those that did not); None when it has no finite root."""
    if not changed or not unchanged:
        return None
    target = sum(unchanged)

    def excess(lam: float) -> float:  # decreasing in λ: Σ t/(e^{λt} − 1) − Σ unchanged
        return sum(t / math.expm1(lam * t) for t in changed) - target

    lo, hi = 1e-9, 1.0
    while excess(hi) > 0:
        hi *= 2
        if hi > 1e6:
            return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def change_rate(visits: Sequence[Visit]) -> float | None:
    """λ̂ (changes per pass) from a page's visits in pass order; None before any interval with a
    known outcome."""
    changed: list[float] = []
    unchanged: list[float] = []
    for before, after in itertools.pairwise(visits):
        if after.changed is None:
            continue
        (changed if after.changed else unchanged).append(float(after.epoch - before.epoch))
    intervals = changed + unchanged
    if not intervals:
        return None
    if len(set(intervals)) > 1:
        lam = mle_estimate(changed, unchanged)
        if lam is not None:
            return lam
    return regular_estimate(len(intervals), len(changed), sum(intervals) / len(intervals))


def next_interval(visits: Sequence[Visit], min_interval: int = MIN_INTERVAL, max_interval: int = MAX_INTERVAL) -> int:
    """Passes from the last visit to the next one (module doc)."""
    assert 1 <= min_interval <= max_interval
    lam = change_rate(visits)
    if lam is None or len(visits) < 2:
        return min_interval
    wanted = max_interval if lam <= 0 else 1 / lam
    last = visits[-1].epoch - visits[-2].epoch
    return int(max(min_interval, min(max_interval, 2 * max(1, last), round(wanted))))


def due(visits: Sequence[Visit], epoch: int, min_interval: int = MIN_INTERVAL, max_interval: int = MAX_INTERVAL) -> bool:
    """Is a page with these visits due in pass ``epoch``?"""
    return bool(visits) and visits[-1].epoch + next_interval(visits, min_interval, max_interval) <= epoch
