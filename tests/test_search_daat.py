"""DAAT AND/OR on fragment indexes (none, local, global with tickets) against a brute-force scan."""

from __future__ import annotations

import random

import pytest
from test_index_fragments import _synthetic_pages

from raycrawl.tasks.index_build import build_index
from raycrawl.tasks.query import BruteForce, QueryProcessor


def _pages_with_cross_copies(seed: int):
    """Synthetic versions plus exact cross-page copies, so global sharing needs tickets."""
    pages = _synthetic_pages(seed)
    urls = sorted(pages)
    rng = random.Random(seed)
    for u in urls[10:20]:
        src = rng.choice(urls[:10])
        pages[u] = {e: list(pages[src][e]) for e in pages[u]}  # later page reuses earlier one's fragments
    return pages


def _check(pages, policy, queries, mode, epoch):
    ix = build_index(pages, policy, w=30)
    qp = QueryProcessor(ix)
    brute = BruteForce([(u, sorted(pages[u].items())) for u in sorted(pages)])
    for q in queries:
        got = qp.search(q, k=1000, mode=mode, epoch=epoch)
        want = brute.search(q, k=1000, mode=mode, epoch=epoch)
        assert [h.page for h in got] == [d for d, _ in want], (policy, q, mode, epoch)
        for h, (_, s) in zip(got, want, strict=True):
            assert h.score == pytest.approx(s, rel=1e-9)
    return qp


@pytest.mark.parametrize("policy", ["none", "local", "global"])
@pytest.mark.parametrize("mode", ["and", "or"])
def test_daat_equals_brute_force(policy, mode):
    pages = _pages_with_cross_copies(11)
    rng = random.Random(4)
    queries = [[f"t{rng.randrange(400)}" for _ in range(rng.randint(1, 3))] for _ in range(40)]
    for epoch in (None, 2):
        _check(pages, policy, queries, mode, epoch)


def test_global_sharing_uses_tickets_and_still_matches():
    pages = _pages_with_cross_copies(12)
    rng = random.Random(9)
    queries = [[f"t{rng.randrange(400)}", f"t{rng.randrange(400)}"] for _ in range(30)]
    ix = build_index(pages, "global", w=30)
    assert ix.reuse, "the copies must create reuse-table entries"
    qp = QueryProcessor(ix)
    tickets = 0
    for q in queries:
        qp.search(q, mode="and")
        tickets += qp.last_stats.tickets
    assert tickets > 0
    _check(pages, "global", queries, "and", None)


def test_versions_reported_per_page():
    pages = {"http://a.test/": {0: ["cat", "dog"] * 10, 1: ["cat"] * 20, 2: ["cat", "dog", "emu"] * 7}}
    hits = QueryProcessor(build_index(pages, "local", w=4)).search(["cat", "dog"])
    assert len(hits) == 1 and [v.epoch for v in hits[0].versions] == [0, 2]
    assert QueryProcessor(build_index(pages, "local", w=4)).search(["cat", "dog"], epoch=1) == []
    assert QueryProcessor(build_index(pages, "local", w=4)).search(["cat", "zebra"]) == []
