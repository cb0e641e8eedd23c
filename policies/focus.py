"""Focus policies: how a focused crawl turns a fetched page into the priority of its out-links (seed 000).

A :class:`FocusPolicy` is what ``raycrawl simulate`` trains and evaluates and what ``raycrawl crawl
--focus MODEL`` runs — one object, saved as JSON (``*.focus.json``), one implementation of every
step both of them take:

* a **classifier** scores a page from its term counts (the text pipeline's stems of its visible
  text, :func:`actors.visit.summary_writer.document_counts` live, the archive's summaries offline):
  :class:`TermQuery` (``hits / (hits + K)`` for a term query) or :class:`LinearClassifier` (the
  log-odds of a two-class multinomial naive Bayes, which gives exactly its ``predict_proba``);
* the **policy** maps the score of a page to the level of the links found on it: ``bfs`` puts
  everything on one level (breadth-first); ``best-first`` gives a link the score of the page it
  was found on quantised to ``levels`` levels (Cho et al.'s and Chakrabarti et al.'s classic); a
  seed starts on the top level;
* the **front queues** (:mod:`policies.front_queues`) pick the next URL among the levels with a
  randomised bias ``bias ** level``.

A URL keeps the level of its first discovery: the sieve emits a URL once (a "queue with memory"),
and the simulator models exactly that.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from raycrawl.errors import UserError
from raycrawl.policies.front_queues import DEFAULT_BIAS

POLICIES = ("bfs", "best-first")
FORMAT = "raycrawl-focus-1"


@dataclass
class TermQuery:
    """A page is relevant when the query stems occur ``min_hits`` times; score hits / (hits + K)."""

    stems: list[str]
    min_hits: int = 1

    def score_counts(self, counts: Mapping[str, int]) -> float:
        return self.score_hits(sum(counts.get(s, 0) for s in self.stems))

    def score_hits(self, hits):
        """The score of pages with ``hits`` query-term occurrences (a number or an array)."""
        return hits / (hits + self.min_hits)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "terms", "stems": self.stems, "min_hits": self.min_hits}


@dataclass
class LinearClassifier:
    """P(relevant | counts) = sigmoid(bias + Σ count(t) · weight(t)); unknown terms weigh 0."""

    weights: dict[str, float]
    bias: float

    def logit(self, counts: Mapping[str, int]) -> float:
        w = self.weights
        return self.bias + sum(c * w[t] for t, c in counts.items() if t in w)

    def score_counts(self, counts: Mapping[str, int]) -> float:
        return _sigmoid(self.logit(counts))

    def score_matrix(self, matrix, terms: Sequence[str]) -> np.ndarray:
        w = np.array([self.weights.get(t, 0.0) for t in terms], dtype=np.float64)
        z = self.bias + np.asarray(matrix @ w).ravel()
        return 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))

    @classmethod
    def from_naive_bayes(cls, model, terms: Sequence[str], positive=True) -> LinearClassifier:
        """The log-odds form of a fitted two-class ``sklearn.naive_bayes.MultinomialNB`` whose
        feature columns are ``terms``: the same probabilities as its ``predict_proba``."""
        classes = list(model.classes_)
        pos, neg = classes.index(positive), 1 - classes.index(positive)
        w = model.feature_log_prob_[pos] - model.feature_log_prob_[neg]
        b = float(model.class_log_prior_[pos] - model.class_log_prior_[neg])
        return cls({t: float(x) for t, x in zip(terms, w.tolist(), strict=True) if x != 0.0}, b)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "linear", "bias": self.bias, "weights": self.weights}


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


Classifier = TermQuery | LinearClassifier


def classifier_from_dict(d: dict[str, Any]) -> Classifier:
    if d.get("kind") == "terms":
        return TermQuery([str(s) for s in d["stems"]], int(d["min_hits"]))
    if d.get("kind") == "linear":
        return LinearClassifier({str(t): float(w) for t, w in d["weights"].items()}, float(d["bias"]))
    raise ValueError(f"unknown classifier kind {d.get('kind')!r}")


@dataclass
class FocusPolicy:
    policy: str                   # "bfs" or "best-first"
    levels: int                   # front queues used (1 for bfs)
    classifier: Classifier
    relevance: str = ""           # the spec it was trained for (``terms:…`` / ``topic:…``)
    bias: float = DEFAULT_BIAS    # front-queue bias (policies/front_queues.py)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise UserError(f"unknown policy {self.policy!r} (use {', '.join(POLICIES)})")
        if self.policy == "bfs":
            self.levels = 1
        if self.levels < 1:
            raise UserError("a focus policy needs at least one level")

    @property
    def seed_level(self) -> int:
        return self.levels - 1

    def link_level(self, score: float) -> int:
        """The level of the links found on a page with classifier score ``score``."""
        if self.levels == 1:
            return 0
        return min(int(score * self.levels), self.levels - 1) if score > 0 else 0

    def link_levels(self, scores: np.ndarray) -> np.ndarray:
        """:meth:`link_level` of many scores at once (the simulator)."""
        if self.levels == 1:
            return np.zeros(len(scores), dtype=np.int64)
        return np.minimum((np.maximum(scores, 0.0) * self.levels).astype(np.int64), self.levels - 1)

    def score_counts(self, counts: Mapping[str, int]) -> float:
        return self.classifier.score_counts(counts)

    # --- the MODEL file --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "policy": self.policy, "levels": self.levels, "bias": self.bias,
                "relevance": self.relevance, "classifier": self.classifier.to_dict(), "info": self.info}

    def save(self, path: Path) -> None:
        from raycrawl.atomic import replace_bytes

        replace_bytes(Path(path), (json.dumps(self.to_dict(), indent=1) + "\n").encode())

    @classmethod
    def load(cls, path: str | Path) -> FocusPolicy:
        """A model written by :meth:`save`; a missing or foreign file is a UserError."""
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"focus model {path}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise UserError(f"focus model {path}: not a focus model (JSON written by raycrawl simulate)") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise UserError(f"focus model {path}: not a focus model (no \"format\": \"{FORMAT}\")")
        try:
            return cls(str(d["policy"]), int(d["levels"]), classifier_from_dict(d["classifier"]),
                       str(d.get("relevance", "")), float(d.get("bias", DEFAULT_BIAS)), dict(d.get("info") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"focus model {path}: damaged ({exc})") from None
