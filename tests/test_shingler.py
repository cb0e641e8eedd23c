"""Shingles, MinHash accuracy and the crawl-time NearDupIndex (memory, Redis, Ray actor)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from raycrawl.actors.shingler import (
    NearDupIndex,
    estimated_jaccard,
    exact_jaccard,
    shingle_hashes,
    shingle_set,
    sketch_texts,
    truncate_sketches,
)
from raycrawl.storage.sketch_store import RedisSketchStore, SketchStoreMismatch

VOCAB = [f"w{i}q" for i in range(20000)]
WEIGHTS = [1 / (i + 1) for i in range(20000)]


def zipf_text(rng: random.Random, n: int = 300) -> str:
    return " ".join(rng.choices(VOCAB, WEIGHTS, k=n))


def edit(rng: random.Random, text: str, n: int) -> str:
    """Replace ``n`` random words with random vocabulary words."""
    words = text.split()
    for _ in range(n):
        words[rng.randrange(len(words))] = rng.choice(VOCAB)
    return " ".join(words)


def corpus(seed: int, clusters: int = 60):
    """(url, text, true cluster id): originals, mirrors (≤ 1 edit, pairwise J ≳ 0.94) and
    near-misses (25–40 edits, J ≲ 0.7, each its own cluster)."""
    rng = random.Random(seed)
    docs, label = [], 0
    for c in range(clusters):
        base = zipf_text(rng)
        docs.append((f"http://h{c}.test/p", base, label))
        for m in range(rng.randrange(0, 4)):
            docs.append((f"http://mirror{m}.h{c}.test/p", edit(rng, base, rng.randrange(0, 2)), label))
        label += 1
        for m in range(rng.randrange(0, 2)):
            docs.append((f"http://miss{m}.h{c}.test/p", edit(rng, base, rng.randrange(25, 41)), label))
            label += 1
    rng.shuffle(docs)
    return docs


def test_shingles_follow_seed_example():
    # Seed 001: "we view text as a sequence of words" has exactly these five 4-shingles.
    text = "we view text as a sequence of words"
    expected = ["we view text as", "view text as a", "text as a sequence", "as a sequence of", "a sequence of words"]
    assert len(shingle_set(text)) == len(expected) == len(set(expected))
    # Set semantics: repeating the text adds only the shingles that span the seam.
    assert len(shingle_set(text + " " + text)) == 5 + 3
    # Case and punctuation are normalised away by the one text pipeline.
    assert shingle_set("We VIEW text, as a sequence of words!") == shingle_set(text)
    # Order matters inside a shingle.
    assert shingle_set("a b c d") != shingle_set("d c b a")
    # Short texts are one shingle, empty ones none.
    assert len(shingle_hashes("two words")) == 1 and len(shingle_hashes("")) == 0
    assert shingle_hashes("two words").dtype == np.uint64


@pytest.mark.parametrize("num_perm, bits", [(128, 32), (256, 32), (512, 8)])
def test_estimate_error_within_theoretical_bound(num_perm, bits):
    rng = random.Random(num_perm)
    errors, bounds = [], []
    c = 2.0**-bits if bits < 32 else 0.0
    for _ in range(150):
        a = zipf_text(rng)
        b = edit(rng, a, rng.randrange(0, 120))
        true = exact_jaccard(shingle_set(a), shingle_set(b))
        sk, _ = sketch_texts([a, b], num_perm=num_perm)
        sk = truncate_sketches(sk, bits)
        errors.append(estimated_jaccard(sk[0], sk[1], bits) - true)
        # Equal components are Binomial(P, p) with p = J + (1 − J)·c (c: chance agreement of
        # b-bit values), so sd(estimate) = sqrt(p(1 − p)/P)/(1 − c) — sqrt(J(1 − J)/P) at 32 bits.
        p = true + (1 - true) * c
        bounds.append(math.sqrt(p * (1 - p) / num_perm) / (1 - c))
    errors, bounds = np.array(errors), np.array(bounds)
    mae = float(np.abs(errors).mean())
    # E|err| = sqrt(2/π)·sd ≈ 0.8·sd: the MAE must stay within the mean theoretical sd.
    assert mae <= bounds.mean(), (mae, bounds.mean())
    # And unbiased: the mean error is within 4 standard errors of 0.
    assert abs(errors.mean()) <= 4 * math.sqrt((bounds**2).mean() / len(errors)) + 1e-3


def _crawl_time_metrics(docs, results):
    """Precision/recall of (page, representative) decisions against the true clusters."""
    label = {u: c for u, _, c in docs}
    flagged = [(u, rep) for (u, _, _), rep in zip(docs, results, strict=True) if rep is not None]
    correct = sum(1 for u, rep in flagged if label[u] == label[rep])
    seen, should = set(), 0
    for _u, _, c in docs:
        should += c in seen
        seen.add(c)
    return correct / max(len(flagged), 1), correct / max(should, 1), len(flagged), should


def test_index_in_memory_finds_mirrors_not_near_misses():
    docs = corpus(7)
    index = NearDupIndex()
    results = []
    for s in range(0, len(docs), 25):  # crawl-like batches
        results += index.check_and_add([(u, t) for u, t, _ in docs[s : s + 25]])
    precision, recall, flagged, should = _crawl_time_metrics(docs, results)
    assert should > 30
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, flagged, should)
    stats = index.stats()
    assert stats["near_duplicates"] == flagged
    assert stats["representatives"] == len(docs) - flagged
    # A representative re-checked is not its own duplicate; an empty page is never stored.
    assert index.check_and_add([(docs[0][0], docs[0][1]) if results[0] is None else ("http://x.test/", "")]) == [None]
    assert index.check_and_add([("http://e.test/", "")]) == [None]
    assert index.stats()["representatives"] == stats["representatives"]


def test_redis_state_survives_restart_and_is_compact(redis_url):
    docs = corpus(11)
    half = len(docs) // 2
    first = NearDupIndex(redis_url=redis_url, key_prefix="t:dedup")
    r1 = first.check_and_add([(u, t) for u, t, _ in docs[:half]])
    first.close()
    # A new instance (what a restarted actor builds) sees every representative stored so far.
    second = NearDupIndex(redis_url=redis_url, key_prefix="t:dedup")
    r2 = second.check_and_add([(u, t) for u, t, _ in docs[half:]])
    reference = NearDupIndex()  # the same stream through one in-memory index
    expected = reference.check_and_add([(u, t) for u, t, _ in docs])
    assert r1 + r2 == expected
    precision, recall, _, _ = _crawl_time_metrics(docs, r1 + r2)
    assert precision >= 0.95 and recall >= 0.95
    store = second.store
    assert isinstance(store, RedisSketchStore)
    assert store.count() == sum(1 for r in expected if r is None)
    # Bounded memory per representative: 512 B of sketch + 16 band keys + URL + overheads.
    per_rep = store.memory_per_representative()
    assert 512 < per_rep < 2048, per_rep
    with pytest.raises(SketchStoreMismatch):
        NearDupIndex(redis_url=redis_url, key_prefix="t:dedup", num_perm=256)


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError):
        NearDupIndex(num_perm=128, bands=30, rows=8)
    with pytest.raises(ValueError):
        NearDupIndex(threshold=1.5)
    with pytest.raises(ValueError):
        NearDupIndex(k=0)


def test_a_new_instance_keeps_the_state_in_redis(redis_url):
    """The agent's checker after a restart (--resume) is a new instance over the same Redis keys."""
    rng = random.Random(5)
    base = [zipf_text(rng) for _ in range(5)]
    first = NearDupIndex(redis_url=redis_url, key_prefix="t:restart")
    assert first.check_and_add([(f"http://o{i}.test/", t) for i, t in enumerate(base)]) == [None] * 5
    assert first.stats()["checked"] == 5
    again = NearDupIndex(redis_url=redis_url, key_prefix="t:restart")
    assert again.stats() == {"checked": 0, "near_duplicates": 0, "representatives": 5}
    mirrors = [(f"http://m{i}.test/", edit(rng, t, 1)) for i, t in enumerate(base)]
    assert again.check_and_add(mirrors) == [f"http://o{i}.test/" for i in range(5)]
    assert again.stats()["near_duplicates"] == 5
