"""Temporal content features of web spam (seed 003 §3.2, after Dai et al.): how each host's BM25
term weights move across crawl snapshots.

Per snapshot T a host's *virtual document* is the bag of words of its HTML pages (the term counts
``raycrawl spam features`` stores in ``DIR/spam/terms.msgpack.gz``: tokens, stopwords out, Porter
stems). The vocabulary is the ``max_terms`` most frequent terms found in at least ``min_df`` and
at most ``max_df`` of the virtual documents (10,000, 10 %, 50 % in the paper). Term weights are
BM25, ``t = IDF · (k1 + 1) tf / (K + tf)``, ``K = k1 ((1 − b) + b · dl / avdl)``,
``IDF = log((N − n + 0.5) / (n + 0.5))`` with N the number of hosts over all snapshots (kept
independent of T, as the paper says: a host absent at T has tf = 0 there), k1 = 1.2, b = 0.75 (the
paper does not give them; these are BM25's usual values). Per host and vocabulary term:

* ``Ave`` = mean over the T_max snapshots; ``AveDiff`` = mean |t(T+1) − t(T)|;
* ``Dev`` = Σ (t − Ave)² / (T_max − 1); ``DevDiff`` = Σ (|Δt| − AveDiff)² / (T_max − 2) (needs
  three snapshots; NaN with two);
* ``Decay`` = Σ λ e^{−λ (T_max − T)} t(T): the latest snapshot weighs most. The paper prints the
  exponent without the minus sign, which would weigh the oldest most, against its own words
  ("exponentially decaying weight"); λ = 0.5 by default (the paper gives no value).

A host present in fewer than two snapshots has every temporal feature missing (the paper's §4):
:func:`temporal_content_features` returns its rows as zeros and says so in ``missing``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse

K1, B = 1.2, 0.75
DECAY_LAMBDA = 0.5
GROUPS = ("Ave", "AveDiff", "Dev", "DevDiff", "Decay")


def vocabulary(snapshots: Sequence[Mapping[str, Mapping[str, int]]], max_terms: int = 10_000, min_df: float = 0.1,
               max_df: float = 0.5) -> list[str]:
    """The paper's vocabulary over every (snapshot, host) virtual document: the most frequent
    terms with document frequency in [min_df, max_df] (fractions of the documents)."""
    df: Counter[str] = Counter()
    cf: Counter[str] = Counter()
    docs = 0
    for snap in snapshots:
        for counts in snap.values():
            docs += 1
            df.update(counts.keys())
            cf.update(counts)
    ok = [t for t, d in df.items() if min_df * docs <= d <= max_df * docs]
    return sorted(ok, key=lambda t: (-cf[t], t))[:max_terms]


def bm25_weights(snap: Mapping[str, Mapping[str, int]], hosts: Sequence[str], vocab: Sequence[str],
                 n_docs: int) -> sparse.csr_matrix:
    """hosts × vocab BM25 weights of one snapshot (rows of absent hosts are 0)."""
    col = {t: j for j, t in enumerate(vocab)}
    lengths = {h: sum(snap[h].values()) for h in hosts if h in snap}
    avdl = (sum(lengths.values()) / len(lengths)) if lengths else 1.0
    n_t = Counter(t for h in lengths for t in snap[h] if t in col)
    idf = np.array([math.log((n_docs - n_t[t] + 0.5) / (n_t[t] + 0.5)) for t in vocab])
    rows, cols, vals = [], [], []
    for i, h in enumerate(hosts):
        if h not in snap:
            continue
        k = K1 * ((1 - B) + B * lengths[h] / max(avdl, 1e-12))
        for t, tf in snap[h].items():
            j = col.get(t)
            if j is not None and tf > 0:
                rows.append(i)
                cols.append(j)
                vals.append(idf[j] * (K1 + 1) * tf / (k + tf))
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(hosts), len(vocab)))


def temporal_content_features(snapshots: Sequence[Mapping[str, Mapping[str, int]]], max_terms: int = 10_000,
                              min_df: float = 0.1, max_df: float = 0.5, decay: float = DECAY_LAMBDA,
                              ) -> tuple[list[str], list[str], dict[str, sparse.csr_matrix], np.ndarray]:
    """(hosts, vocabulary, {group: hosts × vocabulary matrix}, missing) over the snapshots in time
    order (each {host: {term: count}}). ``DevDiff`` is absent with fewer than three snapshots."""
    if len(snapshots) < 2:
        raise ValueError("temporal features need at least two snapshots")
    hosts = sorted({h for snap in snapshots for h in snap})
    vocab = vocabulary(snapshots, max_terms, min_df, max_df)
    w = [bm25_weights(snap, hosts, vocab, len(hosts)) for snap in snapshots]
    t_max = len(w)
    ave = sum(w) / t_max
    diffs = [abs(w[i + 1] - w[i]) for i in range(t_max - 1)]
    ave_diff = sum(diffs) / (t_max - 1)
    # (t − Ave)² summed: Σ t² − T·Ave² keeps the matrices sparse
    dev = (sum(m.multiply(m) for m in w) - ave.multiply(ave) * t_max) / (t_max - 1)
    groups = {"Ave": ave, "AveDiff": ave_diff, "Dev": dev,
              "Decay": sum(decay * math.exp(-decay * (t_max - 1 - i)) * m for i, m in enumerate(w))}
    if t_max >= 3:
        groups["DevDiff"] = (sum(d.multiply(d) for d in diffs) - ave_diff.multiply(ave_diff) * (t_max - 1)) / (t_max - 2)
    present = np.array([[h in snap for h in hosts] for snap in snapshots])
    missing = present.sum(axis=0) < 2
    keep = sparse.diags((~missing).astype(np.float64))
    out = {g: (keep @ sparse.csr_matrix(m)).tocsr() for g, m in groups.items()}
    for m in out.values():
        m.data[np.abs(m.data) < 1e-12] = 0.0  # rounding of the sum-of-squares forms
        m.eliminate_zeros()
    return hosts, vocab, out, missing
