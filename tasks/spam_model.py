"""Spam classifiers and Caruana's ensemble selection (seed 003 part 2, §4).

A *library* of models — (name, feature set, scikit-learn estimator) — is trained with 5-fold
cross-validation whose folds never split a host group (hosts sharing an IP or a registered
domain). **Ensemble selection** (Caruana et al. 2004/2006) then picks a weighted bag of library
models on the out-of-fold predictions, optimising AUC:

* *sorted initialisation*: start from the ``init_size`` best single models;
* *greedy forward selection with replacement*: ``n_iter`` times add the model (possibly again)
  that most improves the ensemble's AUC, keep the best prefix;
* *bagging*: repeat the selection on ``n_bags`` random halves of the library and add up the picks.

The ensemble's score is the pick-weighted mean of its models' spam probabilities (each refit on
all training hosts). Feature data is a dict ``set name -> matrix`` (dense ndarray or CSR) over the
same hosts, so a model sees only its own feature set.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import sparse

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- host groups
@lru_cache(maxsize=1)
def _extractor():
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def registered_domain(host: str) -> str:
    """The registered domain of ``host`` (public suffix + one label); for a TLD outside the public
    suffix list (``.test``) the last two labels."""
    ext = _extractor()(host)
    if ext.suffix:
        return f"{ext.domain}.{ext.suffix}" if ext.domain else ext.suffix
    labels = host.lower().rstrip(".").split(".")
    return ".".join(labels[-2:])


def host_groups(hosts: list[str], ips: list[str]) -> np.ndarray:
    """Group id per host: connected components of "same IP" ∪ "same registered domain"."""
    parent = list(range(len(hosts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, (h, ip) in enumerate(zip(hosts, ips, strict=True)):
        for key in (("dom", registered_domain(h)), ("ip", ip or f"none:{h}")):
            j = first.setdefault(key, i)
            a, b = find(i), find(j)
            if a != b:
                parent[a] = b
    roots = [find(i) for i in range(len(hosts))]
    remap = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return np.array([remap[r] for r in roots], dtype=np.int64)


def group_split(groups: np.ndarray, y: np.ndarray, test_frac: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train mask, test mask): whole groups on either side, spam groups split in the same
    proportion as honest ones (so a small test set still holds spam)."""
    rng = np.random.default_rng(seed)
    uniq = np.unique(groups)
    if len(uniq) < 2:
        raise ValueError("all hosts form one IP/domain group: no train/test split possible")
    spam_groups = set(np.unique(groups[y == 1]).tolist())
    test: set[int] = set()
    for pool in ([g for g in uniq if g in spam_groups], [g for g in uniq if g not in spam_groups]):
        pool = list(pool)
        rng.shuffle(pool)
        test.update(pool[: max(1, round(test_frac * len(pool)))] if pool else [])
    te = np.isin(groups, list(test))
    return ~te, te


def group_folds(groups: np.ndarray, y: np.ndarray, k: int = 5, seed: int = 0) -> list[np.ndarray]:
    """Fold index arrays (test positions) for k-fold CV without splitting a group; spam groups
    dealt round-robin first so every fold gets some."""
    rng = np.random.default_rng(seed)
    uniq = np.unique(groups)
    spam_groups = set(np.unique(groups[y == 1]).tolist())
    order = [g for g in rng.permutation(uniq) if g in spam_groups] + [g for g in rng.permutation(uniq) if g not in spam_groups]
    fold_of = {g: i % k for i, g in enumerate(order)}
    f = np.array([fold_of[g] for g in groups])
    return [np.flatnonzero(f == i) for i in range(k)]


# ---------------------------------------------------------------------------- library
def _signed_log(x):
    return np.sign(x) * np.log1p(np.abs(x))


def _dense_models(seed: int) -> list[tuple[str, object]]:
    from sklearn.ensemble import BaggingClassifier, GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    def logt():
        return FunctionTransformer(_signed_log)

    return [
        ("logreg", make_pipeline(logt(), StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=3000))),
        ("logreg_c0.05", make_pipeline(logt(), StandardScaler(), LogisticRegression(C=0.05, class_weight="balanced", max_iter=3000))),
        ("naive_bayes", make_pipeline(logt(), GaussianNB())),
        ("random_forest", RandomForestClassifier(n_estimators=150, class_weight="balanced_subsample", min_samples_leaf=2,
                                                 random_state=seed, n_jobs=1)),
        ("bagged_trees", BaggingClassifier(DecisionTreeClassifier(min_samples_leaf=2, class_weight="balanced"),
                                           n_estimators=40, random_state=seed, n_jobs=1)),
        ("boosted_trees", GradientBoostingClassifier(n_estimators=100, max_depth=2, learning_rate=0.1, subsample=0.8,
                                                     random_state=seed)),
    ]


def _sparse_models(seed: int) -> list[tuple[str, object]]:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import BernoulliNB
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    return [
        ("logreg", make_pipeline(MaxAbsScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=3000))),
        ("naive_bayes", BernoulliNB(alpha=1.0)),
        ("random_forest", RandomForestClassifier(n_estimators=150, class_weight="balanced_subsample", min_samples_leaf=2,
                                                 max_features="sqrt", random_state=seed, n_jobs=1)),
    ]


def default_library(data: dict[str, np.ndarray | sparse.spmatrix], sets: list[str], seed: int = 0) -> list[tuple[str, str, object]]:
    """(model name, feature set, unfitted estimator) for every set in ``sets``: sparse sets get the
    linear/NB/forest models, dense ones also bagged and boosted trees."""
    lib = []
    for s in sets:
        models = _sparse_models(seed) if sparse.issparse(data[s]) else _dense_models(seed)
        lib.extend((f"{s}:{name}", s, est) for name, est in models)
    return lib


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC of scores ``p`` for 0/1 labels ``y``, as the Mann-Whitney statistic (tied scores get
    their average rank: the trapezoids of scikit-learn's ``roc_auc_score``). Ensemble selection
    asks it thousands of times per training; ``roc_auc_score``'s input validation made it ~1 ms a
    call, a sixth of a quick training's CPU (py-spy of the demo's spam stage)."""
    from scipy.stats import rankdata

    y = np.asarray(y)
    pos = int(np.count_nonzero(y))
    neg = len(y) - pos
    if not pos or not neg:
        return float("nan")
    ranks = rankdata(p)
    return float((ranks[y != 0].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _proba(est, X) -> np.ndarray:
    return est.predict_proba(X)[:, 1]


# ---------------------------------------------------------------------------- ensemble selection
@dataclass
class EnsembleSelection:
    """Caruana's ensemble selection over a model library (see the module docstring)."""

    n_iter: int = 100
    n_bags: int = 20
    bag_frac: float = 0.5
    init_size: int = 3
    folds: int = 5
    seed: int = 0
    weights: dict[str, float] = field(default_factory=dict)
    cv_auc: dict[str, float] = field(default_factory=dict)
    ensemble_cv_auc: float = float("nan")
    oof_scores: np.ndarray | None = None  # the ensemble's out-of-fold score of each training row
    models: dict[str, tuple[str, object]] = field(default_factory=dict)

    def fit(self, data: dict, y: np.ndarray, groups: np.ndarray, library: list[tuple[str, str, object]]) -> EnsembleSelection:
        """Out-of-fold predictions of every library model, selection on them, refit of the picked
        models on all rows. Needs both classes in ``y``."""
        from sklearn.base import clone

        y = np.asarray(y).astype(int)
        assert 0 < y.sum() < len(y), "training needs spam and honest hosts"
        folds = group_folds(groups, y, self.folds, self.seed)
        oof = {}
        for name, s, est in library:
            X = data[s]
            p = np.zeros(len(y))
            for te in folds:
                tr = np.setdiff1d(np.arange(len(y)), te)
                if y[tr].sum() == 0 or y[tr].sum() == len(tr):
                    p[te] = y[tr].mean()
                    continue
                p[te] = _proba(clone(est).fit(X[tr], y[tr]), X[te])
            oof[name] = p
            self.cv_auc[name] = _auc(y, p)
        names = [n for n, _, _ in library]
        picks = self._select(oof, y, names)
        total = sum(picks.values())
        self.weights = {n: c / total for n, c in picks.items() if c}
        ens = sum(w * oof[n] for n, w in self.weights.items())
        self.ensemble_cv_auc = _auc(y, ens)
        self.oof_scores = np.asarray(ens, dtype=np.float64)
        by_name = {n: (s, est) for n, s, est in library}
        for n in self.weights:
            s, est = by_name[n]
            self.models[n] = (s, clone(est).fit(data[s], y))
        log.info("ensemble selection: %d of %d models picked, CV AUC %.4f (best single %.4f)", len(self.weights),
                 len(library), self.ensemble_cv_auc, max(self.cv_auc.values()))
        return self

    def _select(self, oof: dict[str, np.ndarray], y: np.ndarray, names: list[str]) -> Counter:
        rng = np.random.default_rng(self.seed)
        picks: Counter = Counter()
        bag_size = max(1, round(self.bag_frac * len(names))) if self.n_bags > 1 else len(names)
        for _ in range(max(1, self.n_bags)):
            bag = list(rng.choice(names, size=bag_size, replace=False)) if self.n_bags > 1 else names
            ranked = sorted(bag, key=lambda n: -np.nan_to_num(self.cv_auc[n], nan=0.0))
            chosen = ranked[: self.init_size]
            total = sum(oof[n] for n in chosen)
            best_auc, best_len = _auc(y, total / len(chosen)), len(chosen)
            for _ in range(self.n_iter):
                cand = max(bag, key=lambda n: _auc(y, (total + oof[n]) / (len(chosen) + 1)))
                chosen.append(cand)
                total = total + oof[cand]
                a = _auc(y, total / len(chosen))
                if a > best_auc + 1e-12:
                    best_auc, best_len = a, len(chosen)
            picks.update(chosen[:best_len])
        return picks

    def predict(self, data: dict) -> np.ndarray:
        """Spam score in [0, 1] of each row of ``data``."""
        assert self.models, "fit first"
        return sum(w * _proba(self.models[n][1], data[self.models[n][0]]) for n, w in self.weights.items())


def evaluate(data: dict, y: np.ndarray, groups: np.ndarray, ensembles: dict[str, list[str]], test_frac: float = 0.3,
             seeds: tuple[int, ...] = (0,), quick: bool = False) -> dict[str, dict]:
    """Held-out AUC of an ensemble per entry of ``ensembles`` (name -> feature sets it may use),
    over one group split per seed. Returns name -> {auc (mean), aucs, best_single, weights}."""
    out: dict[str, dict] = {}
    for name, sets in ensembles.items():
        aucs, singles = [], []
        es = None
        for seed in seeds:
            tr, te = group_split(groups, y, test_frac, seed)
            sub = {s: data[s][tr] for s in sets}
            lib = default_library(data, sets, seed)
            es = EnsembleSelection(seed=seed, n_iter=30 if quick else 100, n_bags=5 if quick else 20)
            es.fit(sub, y[tr], groups[tr], lib)
            aucs.append(_auc(y[te], es.predict({s: data[s][te] for s in sets})))
            best = max(es.cv_auc, key=es.cv_auc.get)
            s, est = next((s, e) for n, s, e in lib if n == best)
            from sklearn.base import clone

            singles.append(_auc(y[te], _proba(clone(est).fit(sub[s], y[tr]), data[s][te])))
        out[name] = {"auc": float(np.mean(aucs)), "aucs": aucs, "best_single": float(np.mean(singles)),
                     "weights": es.weights if es else {}, "test_hosts": int(te.sum()), "test_spam": int(y[te].sum())}
    return out
