"""Relevance for focused-crawl simulations: ground truth plus a classifier over summaries (seed 000).

A :class:`Relevance` carries, for every node of the replayed graph, the ground truth (is the page
relevant?) and the score the focused crawler's classifier gives the page once it has "fetched" it
(its summary is all it sees). Scores are computed for all nodes at once for speed; a policy only
ever reads the score of a page it has already fetched.

Specifications (``--relevance SPEC``):

* ``terms:W1,W2,...[@K]`` — a term query: a page is relevant when the query terms (passed through
  the same text pipeline as the pages, so ``gardening`` matches ``garden``) occur at least ``K``
  times in it (default 1). Truth and classifier are the same rule; the score is
  ``hits / (hits + K)`` (≥ 0.5 exactly for relevant pages), so partial matches rank above none.
* ``topic:LABEL`` — labelled ground truth (a websim topic, or any ``url<TAB>label`` file): a page
  is relevant when its label is LABEL. The classifier is a small trained model, a multinomial
  naive Bayes over term counts fitted on ``train`` labelled example pages (what a user gives a
  focused crawler); its score is P(LABEL | summary).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from raycrawl.errors import UserError
from raycrawl.policies.focus import Classifier, LinearClassifier, TermQuery
from raycrawl.storage.summaries import DecodedSummaries

log = logging.getLogger(__name__)


@dataclass
class Relevance:
    spec: str
    truth: np.ndarray  # bool per node
    score: np.ndarray  # float in [0, 1] per node (0 without a summary)
    info: dict = field(default_factory=dict)
    classifier: Classifier | None = None  # what computed ``score``: a focus policy's classifier


def _node_vector(decoded: DecodedSummaries, num_nodes: int, values: np.ndarray, dtype) -> np.ndarray:
    out = np.zeros(num_nodes, dtype=dtype)
    out[decoded.doc_ids] = values
    return out


def term_query(decoded: DecodedSummaries, num_nodes: int, term_id, words: list[str], min_hits: int = 1,
               spec: str = "") -> Relevance:
    """Relevance by a term query; ``term_id(term)`` maps an original term to its archive id."""
    from raycrawl import text

    if min_hits < 1:
        raise UserError("terms:…@K needs K ≥ 1")
    stems = text.stems([w.lower() for w in words], drop_stopwords=False)
    ids = sorted({i for i in (term_id(s) for s in stems) if i is not None})
    if not ids:
        raise UserError(f"none of the query terms {stems} is in the archive's dictionary "
                        "(too rare for min_df, or a stopword?)")
    mask = np.isin(decoded.term_ids, np.array(ids, dtype=np.int64))
    doc_of_pair = np.repeat(np.arange(len(decoded.doc_ids)), np.diff(decoded.offsets))
    hits = np.bincount(doc_of_pair[mask], weights=decoded.counts[mask], minlength=len(decoded.doc_ids))
    truth = _node_vector(decoded, num_nodes, hits >= min_hits, bool)
    clf = TermQuery(sorted(set(stems)), min_hits)
    score = _node_vector(decoded, num_nodes, clf.score_hits(hits), np.float64)
    return Relevance(spec or f"terms:{','.join(words)}@{min_hits}", truth, score,
                     {"kind": "term query", "terms": stems, "term_ids": ids, "relevant": int(truth.sum())}, clf)


def summary_matrix(decoded: DecodedSummaries, n_terms: int):
    """Documents × terms CSR matrix of counts (rows in ``decoded.doc_ids`` order)."""
    from scipy.sparse import csr_matrix

    return csr_matrix((decoded.counts.astype(np.float32), decoded.term_ids, decoded.offsets),
                      shape=(len(decoded.doc_ids), n_terms))


def topic_model(decoded: DecodedSummaries, num_nodes: int, terms: list[str], labels: np.ndarray, label,
                train: int = 200, seed: int = 0, spec: str = "") -> Relevance:
    """Relevance by labels (ground truth) with a naive Bayes classifier trained on ``train`` pages.

    ``labels`` holds one label per node (None / "" for unlabelled nodes); ``terms`` is the
    archive's dictionary (the classifier keeps its weights by term, for live crawls).
    """
    from sklearn.naive_bayes import MultinomialNB

    truth = np.array([lab == label for lab in labels], dtype=bool)
    if not truth.any():
        raise UserError(f"no page has the label {label!r}")
    X = summary_matrix(decoded, len(terms))  # noqa: N806 — the usual name for a design matrix
    doc_labels = labels[decoded.doc_ids]
    labelled = np.flatnonzero(np.array([lab not in (None, "") for lab in doc_labels]))
    rng = np.random.default_rng(seed)
    pick = rng.choice(labelled, size=min(train, len(labelled)), replace=False)
    y = truth[decoded.doc_ids][pick]
    if y.all() or not y.any():
        raise UserError(f"the {len(pick)} training pages hold a single class; raise --train")
    model = MultinomialNB(alpha=0.1).fit(X[pick], y)
    clf = LinearClassifier.from_naive_bayes(model, terms)
    proba = clf.score_matrix(X, terms)  # = model.predict_proba(X)[:, True] (tests/test_front_queues.py)
    score = _node_vector(decoded, num_nodes, proba, np.float64)
    held = np.setdiff1d(labelled, pick)
    acc = float(((proba[held] >= 0.5) == truth[decoded.doc_ids][held]).mean()) if len(held) else float("nan")
    return Relevance(spec or f"topic:{label}", truth, score,
                     {"kind": "naive Bayes on summaries", "label": str(label), "train_pages": int(len(pick)),
                      "held_out_accuracy": acc, "relevant": int(truth.sum())}, clf)


def from_spec(spec: str, decoded: DecodedSummaries, num_nodes: int, terms: list[str], term_id,
              labels: np.ndarray | None = None, train: int = 200, seed: int = 0) -> Relevance:
    """Parse ``terms:…[@K]`` or ``topic:LABEL`` (see the module docstring)."""
    kind, _, arg = spec.partition(":")
    if kind == "terms" and arg:
        words, _, k = arg.partition("@")
        try:
            min_hits = int(k) if k else 1
        except ValueError:
            raise UserError(f"bad relevance spec {spec!r}: @K must be an integer") from None
        return term_query(decoded, num_nodes, term_id, [w for w in words.split(",") if w], min_hits, spec)
    if kind == "topic" and arg:
        if labels is None:
            raise UserError("topic:LABEL needs page labels: give --truth FILE (url<TAB>label lines)")
        return topic_model(decoded, num_nodes, terms, labels, arg, train, seed, spec)
    raise UserError(f"bad relevance spec {spec!r}: use terms:W1,W2[@K] or topic:LABEL")
