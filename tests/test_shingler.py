"""Shingles, MinHash accuracy and the crawl-time NearDupIndex (memory, and the sharded stores on disk)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from raycrawl.actors.visit.duplicates import ShardedDuplicates, ask_local
from raycrawl.actors.visit.shingler import (
    NearDupIndex,
    estimated_jaccard,
    exact_jaccard,
    near_dup_meta,
    shingle_hashes,
    shingle_set,
    sketch_texts,
    truncate_sketches,
)
from raycrawl.policies.assignment import SHARDS
from raycrawl.storage.dedup_store import DedupShards, DedupStoreMismatch

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
    assert index.stats()["near_duplicates"] == flagged
    assert index.store.count() == len(docs) - flagged
    # A representative re-checked is not its own duplicate; an empty page is never stored.
    assert index.check_and_add([(docs[0][0], docs[0][1]) if results[0] is None else ("http://x.test/", "")]) == [None]
    assert index.check_and_add([("http://e.test/", "")]) == [None]
    assert index.store.count() == len(docs) - flagged


def disk_index(root, shards=range(SHARDS)) -> tuple[NearDupIndex, DedupShards]:
    """The crawl's index over shard files on disk, every shard held by this process."""
    stores = DedupShards(root, shards)
    stores.set_meta(near_dup_meta())
    return NearDupIndex(store=ShardedDuplicates(ask_local(stores))), stores


def test_disk_state_survives_restart_and_is_compact(tmp_path):
    docs = corpus(11)
    half = len(docs) // 2
    first, stores = disk_index(tmp_path)
    r1 = first.check_and_add([(u, t) for u, t, _ in docs[:half]])
    stores.close()
    # A new instance (what a restarted actor builds) sees every representative stored so far.
    second, stores = disk_index(tmp_path)
    r2 = second.check_and_add([(u, t) for u, t, _ in docs[half:]])
    reference = NearDupIndex()  # the same stream through one in-memory index
    expected = reference.check_and_add([(u, t) for u, t, _ in docs])
    assert r1 + r2 == expected
    precision, recall, _, _ = _crawl_time_metrics(docs, r1 + r2)
    assert precision >= 0.95 and recall >= 0.95
    reps = sum(1 for r in expected if r is None)
    counts = stores.counts()
    assert counts["rep"] == reps and counts["band"] <= 16 * reps
    stores.close()
    other = DedupShards(tmp_path, range(SHARDS))
    other.set_meta(near_dup_meta(num_perm=256))
    with pytest.raises(DedupStoreMismatch):
        other.bands({0: [1]})


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError):
        NearDupIndex(num_perm=128, bands=30, rows=8)
    with pytest.raises(ValueError):
        NearDupIndex(threshold=1.5)
    with pytest.raises(ValueError):
        NearDupIndex(k=0)


def test_a_new_instance_keeps_the_state_on_disk(tmp_path):
    """The agent's checker after a restart (--resume) is a new instance over the same shard files."""
    rng = random.Random(5)
    base = [zipf_text(rng) for _ in range(5)]
    first, stores = disk_index(tmp_path)
    assert first.check_and_add([(f"http://o{i}.test/", t) for i, t in enumerate(base)]) == [None] * 5
    assert first.stats()["checked"] == 5
    stores.close()
    again, stores = disk_index(tmp_path)
    assert again.stats() == {"checked": 0, "near_duplicates": 0}
    assert stores.counts()["rep"] == 5
    mirrors = [(f"http://m{i}.test/", edit(rng, t, 1)) for i, t in enumerate(base)]
    assert again.check_and_add(mirrors) == [f"http://o{i}.test/" for i in range(5)]
    assert again.stats()["near_duplicates"] == 5


def test_shards_split_between_two_holders_answer_as_one(tmp_path):
    """Two agents' keepers, each holding half the shards: the index finds the same duplicates as
    one in-memory index, and a shard asked of the wrong holder is refused."""
    docs = corpus(13)
    a, b = DedupShards(tmp_path, range(0, SHARDS, 2)), DedupShards(tmp_path, range(1, SHARDS, 2))

    def ask(method, by_shard):
        parts = [{s: p for s, p in by_shard.items() if s % 2 == k} for k in (0, 1)]
        return [getattr(holder, method)(part) for holder, part in zip((a, b), parts, strict=True) if part]

    split = NearDupIndex(store=ShardedDuplicates(ask))
    got = []
    for s in range(0, len(docs), 25):
        got += split.check_and_add([(u, t) for u, t, _ in docs[s:s + 25]])
    assert got == NearDupIndex().check_and_add([(u, t) for u, t, _ in docs])
    assert a.counts()["rep"] > 0 and b.counts()["rep"] > 0
    with pytest.raises(ValueError):
        a.bands({1: [1]})


def test_representatives_wait_in_memory_until_flushed(tmp_path):
    """The crawl writes new representatives in groups: until then they are matched from memory,
    across batches; a flush (every flush_reps, flush_seconds, or at close) writes them all."""
    rng = random.Random(9)
    base = [zipf_text(rng) for _ in range(6)]
    stores = DedupShards(tmp_path, range(SHARDS))
    stores.set_meta(near_dup_meta())
    index = NearDupIndex(store=ShardedDuplicates(ask_local(stores)), flush_reps=1024, flush_seconds=3600)
    assert index.check_and_add([(f"http://o{i}.test/", t) for i, t in enumerate(base)]) == [None] * 6
    assert stores.counts()["rep"] == 0  # not written yet...
    mirrors = [(f"http://m{i}.test/", edit(rng, t, 1)) for i, t in enumerate(base)]
    assert index.check_and_add(mirrors) == [f"http://o{i}.test/" for i in range(6)]  # ...but matched
    index.close()
    assert stores.counts()["rep"] == 6
    again = NearDupIndex(store=ShardedDuplicates(ask_local(stores)))
    assert again.check_and_add(mirrors[:2]) == ["http://o0.test/", "http://o1.test/"]
