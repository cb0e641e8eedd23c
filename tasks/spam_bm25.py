"""BM25 bag of words over each host's virtual document (seed 003 part 2, §3.2).

A host's virtual document is the bag of terms (``raycrawl.text`` stems, stopwords removed) of its
sampled HTML pages. Vocabulary: the ``max_terms`` (10,000) most frequent terms found in at least
``min_df`` (10%) and at most ``max_df`` (50%) of the virtual documents. Weight of term i in d:

    t_id = IDF_i · (k1 + 1) tf_id / (K + tf_id),  K = k1 ((1 - b) + b · dl / avdl),
    IDF_i = log((N - n_i + 0.5) / (n_i + 0.5))

with k1 = 1.2, b = 0.75. ``N`` may be fixed by the caller (the paper keeps N independent of the
snapshot so weights of different crawls compare).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import sparse

K1 = 1.2
B = 0.75


@dataclass(slots=True)
class Bm25Vocabulary:
    terms: list[str]
    idf: np.ndarray
    avdl: float
    n_docs: int

    @classmethod
    def build(cls, docs: dict[str, Counter], max_terms: int = 10_000, min_df: float = 0.1, max_df: float = 0.5,
              n_docs: int | None = None) -> Bm25Vocabulary:
        """The vocabulary of ``docs`` (host -> term counts) per the paper's rule."""
        n = n_docs or len(docs)
        assert n >= len(docs) > 0, "need at least one document and N >= number of documents"
        df: Counter = Counter()
        cf: Counter = Counter()
        for counts in docs.values():
            df.update(counts.keys())
            cf.update(counts)
        lo, hi = min_df * len(docs), max_df * len(docs)
        eligible = [t for t, c in df.items() if lo <= c <= hi]
        eligible.sort(key=lambda t: (-cf[t], t))
        terms = eligible[:max_terms]
        idf = np.array([np.log((n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms])
        avdl = float(np.mean([sum(c.values()) for c in docs.values()]))
        return cls(terms, idf, avdl, n)

    def weights(self, docs: dict[str, Counter], hosts: list[str]) -> sparse.csr_matrix:
        """BM25 weight matrix, one row per host of ``hosts`` (absent hosts: zero rows)."""
        index = {t: j for j, t in enumerate(self.terms)}
        rows, cols, vals = [], [], []
        for i, h in enumerate(hosts):
            counts = docs.get(h)
            if not counts:
                continue
            dl = sum(counts.values())
            k = K1 * ((1 - B) + B * dl / max(self.avdl, 1e-9))
            for t, tf in counts.items():
                j = index.get(t)
                if j is not None:
                    rows.append(i)
                    cols.append(j)
                    vals.append(self.idf[j] * (K1 + 1) * tf / (k + tf))
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(hosts), len(self.terms)))
