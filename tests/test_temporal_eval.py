"""The temporal-search evaluation metrics against hand-worked cases and scikit-learn's NDCG."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from raycrawl.tasks.temporal_eval import (
    grades_for,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    topic_grades,
    websim_topics,
    websim_truth,
)


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
    # topic grading: on the term's topic with it 2, without it 1; off-topic pages with it 0
    assert topic_grades("t", {"t": {"u", "x"}}, {"u": 3, "v": 3, "x": 1}, {"t": 3}) == {"u": 2, "v": 1}


def test_websim_topics_are_what_the_text_is_about():
    """The latent topics the topic grading uses agree with the words websim wrote: most of a page's
    topical terms are its topic's (websim draws 70 % of a paragraph from it), and a term's topic is
    the one whose pages use it most."""
    from collections import Counter

    page_topic, term_topic = websim_topics(30, 4, 3, 1, 6.0, 8080)
    having, _ = websim_truth(30, 4, 3, 0, 1, 6.0, 8080)
    assert len(set(page_topic.values())) > 3 and len(term_topic) > 100
    words_of: dict[str, Counter] = {}
    for term, urls in having.items():
        for u in urls:
            if term in term_topic:
                words_of.setdefault(u, Counter())[term_topic[term]] += 1
    agree = [c.most_common(1)[0][0] == page_topic[u] for u, c in words_of.items() if u in page_topic]
    assert len(agree) > 50 and sum(agree) >= 0.9 * len(agree)
    users = Counter()
    for term, urls in having.items():
        if term in term_topic and len(urls) >= 5:
            users[term] = Counter(page_topic[u] for u in urls if u in page_topic).most_common(1)[0][0] == term_topic[term]
    assert len(users) > 30 and sum(users.values()) >= 0.9 * len(users)


def test_ndcg_equals_sklearn_with_exponential_gains():
    from sklearn.metrics import ndcg_score  # (3 s of import: not in every worker's collection)

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
