"""The temporal-search evaluation metrics against hand-worked cases and scikit-learn's NDCG."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from raycrawl.tasks.temporal_eval import grades_for, ndcg_at_k, recall_at_k, reciprocal_rank


def test_hand_worked():
    grades = {"a": 2, "b": 1, "c": 2}
    ranked = ["x", "b", "a", "y"]
    # DCG@3 = 0 + 1/log2(3) + 3/log2(4); ideal: 3/1 + 3/log2(3) + 1/2
    want = (1 / math.log2(3) + 3 / 2) / (3 + 3 / math.log2(3) + 1 / 2)
    assert ndcg_at_k(ranked, grades, 3) == pytest.approx(want)
    assert reciprocal_rank(ranked, grades) == pytest.approx(1 / 3)  # first grade-2 page
    assert reciprocal_rank(ranked, grades, level=1) == pytest.approx(1 / 2)
    assert recall_at_k(ranked, grades, 15) == pytest.approx(1 / 2)  # a found, c not
    assert ndcg_at_k(ranked, {}, 3) == 0.0 and reciprocal_rank([], grades) == 0.0
    assert grades_for("t", {"t": {"u", "v"}}, {"u": True, "v": False}) == {"u": 2, "v": 1}


def test_ndcg_equals_sklearn_with_exponential_gains():
    rng = random.Random(4)
    for _ in range(20):
        pages = [f"p{i}" for i in range(30)]
        grades = {p: rng.choice([0, 0, 1, 2]) for p in pages}
        ranked = rng.sample(pages, 30)
        k = rng.randint(1, 15)
        # sklearn ranks by score and applies linear gains: give it 2^g - 1 as the relevance
        rel = np.array([[2 ** grades[p] - 1 for p in pages]])
        score = np.array([[30 - ranked.index(p) for p in pages]])
        ours = ndcg_at_k(ranked, {p: g for p, g in grades.items() if g}, k)
        assert ours == pytest.approx(ndcg_score(rel, score, k=k))
