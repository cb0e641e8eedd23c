"""The crawl-time spam gate: a lightweight content-only model that blocks a host after a sample.

Seed 003 part 2 (§6.2, Table 14) argues that a minimal content feature set computed incrementally
can intercept spam at crawl time "based on a sample of a new Web site". Here: for every fetched
HTML page the crawler hands :meth:`SpamGate.observe` the page's *local* content features
(:data:`tasks.spam_features.LOCAL_FEATURES` — no corpus statistics, no links), the gate keeps a
running mean/variance per host, and when a host reaches ``sample_pages`` pages it is scored once by
a standardised logistic regression; at or past ``threshold`` the host is *blocked*: the crawler
should schedule none of its URLs any more. The decision is final (no flapping) and never made on
fewer than ``sample_pages`` pages.

Optional crawl-order duplicate features (:data:`SHINGLE_FEATURES`, used when the model lists
them): ``foreign_frac`` — share of the page's 8-word shingles first seen on *another* host earlier
in the crawl — and ``foreign_hosts`` — how many other hosts those were. Copied-content spam
stitches paragraphs of several popular hosts (many foreign hosts per page); a mirror copies one
host; an original is seen first. The gate's :class:`ShingleMemory` holds one hash per shingle.

The model is a JSON file (``gate.json``: feature names, means, scales, coefficients, intercept,
threshold, sample size, query terms) so the crawler needs neither scikit-learn nor pickle.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SHINGLE_FEATURES = ("foreign_frac", "foreign_hosts")
SHINGLE_WORDS = 8


class ShingleMemory:
    """First host seen for every 8-word shingle, in crawl order."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}

    def foreign(self, host: str, words: list[str]) -> tuple[float, int]:
        """(share of shingles first seen on another host, number of such hosts); records the
        page's new shingles as ``host``'s."""
        import xxhash

        k = SHINGLE_WORDS
        if len(words) < k:
            return 0.0, 0
        others: set[str] = set()
        hits = 0
        total = len(words) - k + 1
        for i in range(total):
            h = xxhash.xxh3_64_intdigest(" ".join(words[i:i + k]).encode())
            first = self.owner.setdefault(h, host)
            if first != host:
                hits += 1
                others.add(first)
        return hits / total, len(others)


@dataclass
class GateModel:
    """Logistic regression over [mean_f, var_f for f in features] of a host's first pages."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float = 0.5
    sample_pages: int = 5
    query_terms: list[str] = field(default_factory=list)
    cv_auc: float = float("nan")

    def score(self, x: np.ndarray) -> float:
        """Spam probability of one aggregated feature vector (len = 2 × len(features))."""
        z = (np.sign(x) * np.log1p(np.abs(x)) - np.asarray(self.mean)) / np.asarray(self.scale)
        t = float(z @ np.asarray(self.coef) + self.intercept)
        return 1.0 / (1.0 + math.exp(-max(min(t, 50.0), -50.0)))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        d = asdict(self)
        d["cv_auc"] = None if math.isnan(self.cv_auc) else self.cv_auc
        path.write_text(json.dumps(d, indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> GateModel:
        """Read ``gate.json``; ValueError on a file that is not one."""
        try:
            d = json.loads(Path(path).read_text())
            d["cv_auc"] = float("nan") if d.get("cv_auc") is None else d["cv_auc"]
            m = cls(**d)
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise ValueError(f"{path}: not a spam gate model ({exc})") from exc
        if not (len(m.mean) == len(m.scale) == len(m.coef) == 2 * len(m.features)):
            raise ValueError(f"{path}: inconsistent gate model dimensions")
        return m


class _Running:
    """Welford running mean/variance of a feature vector."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.mean = np.zeros(dim)
        self.m2 = np.zeros(dim)

    def add(self, x: np.ndarray) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    def vector(self) -> np.ndarray:
        return np.concatenate([self.mean, self.m2 / max(self.n, 1)])


class SpamGate:
    """Per-host decisions of a :class:`GateModel` as pages arrive. Not thread-safe."""

    def __init__(self, model: GateModel, threshold: float | None = None,
                 query_terms: frozenset[str] | set[str] | None = None) -> None:
        """``query_terms`` replaces the model's popular-query list (the query log of the web being
        crawled, when it differs from the training web's)."""
        self.model = model
        self.threshold = model.threshold if threshold is None else threshold
        assert 0.0 <= self.threshold <= 1.0
        self.query_terms = frozenset(model.query_terms if query_terms is None else query_terms)
        self._stats: dict[str, _Running] = {}
        self.blocked: dict[str, float] = {}  # host -> score at the decision
        self.scores: dict[str, float] = {}   # every host decided so far
        self.pages_after_block = 0           # pages observed for already-blocked hosts (should stay ~0)
        self.memory = ShingleMemory() if any(f in SHINGLE_FEATURES for f in model.features) else None

    def page_features(self, html: bytes | str, host: str = "") -> np.ndarray:
        """The features of one fetched page, in the model's order, as :meth:`observe` wants them
        (call once per fetched page, in fetch order: the shingle memory learns from it)."""
        return page_feature_vector(html, host, self.query_terms, self.memory, self.model.features)

    def observe(self, host: str, page_features: np.ndarray) -> bool:
        """Record one fetched HTML page of ``host``; True iff the host is (now) blocked."""
        if host in self.blocked:
            self.pages_after_block += 1
            return True
        st = self._stats.get(host)
        if st is None:
            st = self._stats[host] = _Running(len(self.model.features))
        st.add(np.asarray(page_features, dtype=np.float64))
        if st.n == self.model.sample_pages:
            s = self.model.score(st.vector())
            self.scores[host] = s
            if s >= self.threshold:
                self.blocked[host] = s
                log.info("spam gate: blocking %s (score %.3f after %d pages)", host, s, st.n)
                return True
        return False

    def is_blocked(self, host: str) -> bool:
        return host in self.blocked


def page_feature_vector(html: bytes | str, host: str, query_terms: frozenset[str], memory: ShingleMemory | None,
                        features: list[str]) -> np.ndarray:
    """Local features (+ shingle features when ``memory`` is given), ordered as ``features``."""
    from raycrawl.policies.spam_page import LOCAL_FEATURES, page_local_features, parse_page

    p = parse_page(html)
    vals = dict(zip(LOCAL_FEATURES, page_local_features(p, query_terms).tolist(), strict=True))
    if memory is not None:
        vals["foreign_frac"], vals["foreign_hosts"] = memory.foreign(host, p.words)
    return np.array([vals[f] for f in features], dtype=np.float64)


def host_samples(page_rows: list[dict], features: list[str], sample_pages: int) -> dict[str, np.ndarray]:
    """host -> the aggregated vector of its first ``sample_pages`` pages (hosts with fewer pages
    are left out: the gate never decides on them)."""
    by_host: dict[str, list[tuple[int, np.ndarray]]] = {}
    for r in page_rows:
        by_host.setdefault(r["host"], []).append((r["order"], np.array([r[f] for f in features], dtype=np.float64)))
    out = {}
    for h, rows in by_host.items():
        rows.sort(key=lambda t: t[0])
        if len(rows) < sample_pages:
            continue
        st = _Running(len(features))
        for _, x in rows[:sample_pages]:
            st.add(x)
        out[h] = st.vector()
    return out


def train_gate(page_rows: list[dict], labels: dict[str, int], sample_pages: int = 5, max_fpr: float = 0.01,
               query_terms: list[str] | None = None, seed: int = 0, features: list[str] | None = None) -> GateModel:
    """Fit the gate on the page rows of labelled hosts (``pages.parquet`` rows). The threshold is
    the lowest score keeping the cross-validated honest-host block rate ≤ ``max_fpr`` (≥ 0.5).
    Raises ValueError without both classes among hosts with ≥ ``sample_pages`` pages."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from raycrawl.policies.spam_page import LOCAL_FEATURES

    feats = list(features or LOCAL_FEATURES)
    samples = host_samples(page_rows, feats, sample_pages)
    hosts = [h for h in samples if h in labels]
    y = np.array([labels[h] for h in hosts])
    if len(hosts) == 0 or not 0 < y.sum() < len(y):
        raise ValueError(f"gate training needs spam and honest hosts with >= {sample_pages} pages")
    X = np.array([samples[h] for h in hosts])
    Xl = np.sign(X) * np.log1p(np.abs(X))
    mean, scale = Xl.mean(axis=0), Xl.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (Xl - mean) / scale
    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000)
    folds = min(5, int(y.sum()), int(len(y) - y.sum()))
    if folds >= 2:
        cv = cross_val_predict(lr, Z, y, cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
                               method="predict_proba")[:, 1]
        auc = float(roc_auc_score(y, cv))
        honest = np.sort(cv[y == 0])
        k = int(math.floor(max_fpr * len(honest)))
        threshold = max(0.5, float(honest[len(honest) - 1 - k]) + 1e-6) if len(honest) else 0.5
    else:
        auc, threshold = float("nan"), 0.5
    lr.fit(Z, y)
    if query_terms is None:
        query_terms = []
    model = GateModel(feats, mean.tolist(), scale.tolist(), lr.coef_[0].tolist(), float(lr.intercept_[0]),
                      min(threshold, 0.999), sample_pages, sorted(query_terms), auc)
    log.info("spam gate: %d hosts (%d spam), CV AUC %.3f, threshold %.3f", len(y), y.sum(), auc, model.threshold)
    return model


def gate_for(settings) -> SpamGate | None:
    """The crawl's gate: the ``spam_gate`` setting (which ``$RAYCRAWL_SPAM_GATE`` fills when unset:
    core/settings.py), else none."""
    from raycrawl.errors import UserError

    path = settings.spam_gate
    if not path:
        return None
    try:
        return SpamGate(GateModel.load(path))
    except ValueError as exc:
        raise UserError(str(exc)) from exc
