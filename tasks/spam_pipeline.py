"""The spam pipeline over a crawl (seed 003; docs/spam.md): host features to ``DIR/spam/``, the
ensemble and crawl-time gate trained on labelled hosts, scores for every host.
``raycrawl spam`` is the command over it.

Files in ``DIR/spam/``: ``features.parquet`` (one row per host: ``host``, ``ip``, content and link
features), ``pages.parquet`` (page-local features of the sampled pages, for the crawl-time gate),
``terms.msgpack.gz`` (each host's term counts: its BM25 virtual document), ``queries.txt`` (the
query terms used), ``model.pkl``, ``gate.json``, ``train.json``, ``scores.parquet``.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)

LINK_PREFIXES = ("indeg", "outdeg", "reciprocity", "pagerank", "log_pagerank", "trustrank", "trust_ratio",
                 "pr_per_indeg", "assort_", "trunc_", "supporters_", "supp_growth_")


def spam_dir(crawl_dir: Path) -> Path:
    return layout(Path(crawl_dir)).spam


def write_features(crawl_dir: Path, query_terms: frozenset[str] = frozenset(), max_pages: int = 400,
                   batch_hosts: int = 64, use_ray: bool = True) -> Path:
    """Compute and store DIR/spam/{features.parquet, pages.parquet, terms.msgpack.gz, queries.txt}."""
    import msgpack
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raycrawl.tasks.spam_features import compute_content_features
    from raycrawl.tasks.spam_link_features import link_features

    crawl_dir = Path(crawl_dir)
    if not crawl_dir.is_dir():
        raise UserError(f"crawl directory not found: {crawl_dir}")
    try:
        hosts, pages, terms = compute_content_features(crawl_dir, query_terms, max_pages, batch_hosts, use_ray)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    links = {r["host"]: r for r in link_features(crawl_dir)}
    link_cols = [c for c in next(iter(links.values()), {}) if c != "host"]
    # A host with HTML pages but no link record of its own cannot exist; default 0 keeps the table rectangular.
    rows = [{**h, **{c: links.get(h["host"], {}).get(c, 0.0) for c in link_cols}} for h in hosts]
    table = pa.Table.from_pylist(rows)
    out = spam_dir(crawl_dir)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / "features.parquet")
    pq.write_table(pa.Table.from_pylist(pages), out / "pages.parquet")
    with gzip.open(out / "terms.msgpack.gz", "wb") as f:
        f.write(msgpack.packb({h: dict(c) for h, c in terms.items()}))
    (out / "queries.txt").write_text("".join(f"{w}\n" for w in sorted(query_terms)))
    log.info("spam features: %d hosts x %d columns -> %s", table.num_rows, table.num_columns, out)
    return out / "features.parquet"


def load_features(crawl_dir: Path):
    """(features pyarrow Table, {host: Counter}) of DIR/spam; UserError if not computed yet."""
    import pyarrow.parquet as pq

    out = spam_dir(crawl_dir)
    if not (out / "features.parquet").is_file():
        raise UserError(f"{out}/features.parquet not found: run 'raycrawl spam features {crawl_dir}' first")
    return pq.read_table(out / "features.parquet"), load_terms(crawl_dir)


def load_terms(crawl_dir: Path) -> dict[str, Counter]:
    """{host: term counts} (each host's virtual document) of DIR/spam; UserError if not computed yet."""
    import msgpack

    path = spam_dir(crawl_dir) / "terms.msgpack.gz"
    if not path.is_file():
        raise UserError(f"{path} not found: run 'raycrawl spam features {crawl_dir}' first")
    with gzip.open(path, "rb") as f:
        return {h: Counter(c) for h, c in msgpack.unpackb(f.read()).items()}


def column_sets(columns: list[str]) -> dict[str, list[str]]:
    """Feature-set name -> columns: Aa, A, B (content, Table 6), content (= B), link."""
    from raycrawl.tasks.spam_features import feature_sets

    sets = feature_sets(columns)
    sets["content"] = sets["B"]
    sets["link"] = [c for c in columns if c.startswith(LINK_PREFIXES)]
    return sets


def feature_data(table, terms: dict[str, Counter], vocab=None) -> tuple[dict, object]:
    """Matrices per feature set for the hosts of ``table`` (row order kept), and the BM25
    vocabulary (built from ``terms`` when ``vocab`` is None)."""
    import numpy as np

    from raycrawl.tasks.spam_bm25 import Bm25Vocabulary

    sets = column_sets(list(table.column_names))
    data = {name: np.column_stack([table.column(c).to_numpy().astype(np.float64) for c in cols])
            for name, cols in sets.items()}
    data["content+link"] = np.hstack([data["content"], data["link"]])
    hosts = table.column("host").to_pylist()
    if vocab is None:
        vocab = Bm25Vocabulary.build({h: terms.get(h, Counter()) for h in hosts})
    data["bm25"] = vocab.weights(terms, hosts)
    return data, vocab


def train(crawl_dir: Path, labels: dict[str, int], sets: list[str], quick: bool = False) -> dict:
    """Fit the ensemble on the labelled hosts of DIR and the crawl-time gate; store both."""
    import pickle

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from raycrawl.policies.spam_gate import train_gate
    from raycrawl.tasks.spam_model import EnsembleSelection, default_library, host_groups

    table, terms = load_features(crawl_dir)
    table = table.filter(pc.is_in(table.column("host"), value_set=pa.array(list(labels))))
    y = np.array([labels[h] for h in table.column("host").to_pylist()])
    if table.num_rows == 0:
        raise UserError("no labelled host of the labels file was crawled")
    if not 0 < y.sum() < len(y):
        raise UserError(f"need both spam and honest labelled hosts (got {int(y.sum())} spam of {len(y)})")
    known = {"content", "link", "bm25", "content+link", "A", "Aa", "B"}
    bad = [s for s in sets if s not in known]
    if bad:
        raise UserError(f"unknown feature set(s) {bad}; choose from {sorted(known)}")
    data, vocab = feature_data(table, terms)
    groups = host_groups(table.column("host").to_pylist(), table.column("ip").to_pylist())
    es = EnsembleSelection(n_iter=30 if quick else 100, n_bags=5 if quick else 20)
    if int(groups.max()) + 1 < es.folds or min(int(y.sum()), len(y) - int(y.sum())) < 2:
        # every fold needs training hosts of both classes, and folds never split an IP/domain group
        raise UserError(f"too few labelled hosts for {es.folds}-fold cross-validation: {len(y)} hosts "
                        f"({int(y.sum())} spam) in {int(groups.max()) + 1} IP/domain groups; need at least "
                        f"{es.folds} groups and 2 hosts of each class")
    es.fit(data, y, groups, default_library(data, sets))
    out = spam_dir(crawl_dir)
    with open(out / "model.pkl", "wb") as f:
        pickle.dump({"ensemble": es, "vocab": vocab, "sets": sets, "columns": list(table.column_names)}, f)
    queries = (out / "queries.txt").read_text().split() if (out / "queries.txt").is_file() else []
    try:
        gate = train_gate(pq.read_table(out / "pages.parquet").to_pylist(), labels, sample_pages=3,
                          query_terms=queries)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    gate.save(out / "gate.json")
    report = {"hosts": len(y), "spam": int(y.sum()), "groups": int(groups.max() + 1), "cv_auc": es.ensemble_cv_auc,
              "weights": es.weights, "model_cv_auc": es.cv_auc, "gate_cv_auc": gate.cv_auc}
    (out / "train.json").write_text(json.dumps(report, indent=2))
    try:
        write_train_png(y, es.oof_scores, es.ensemble_cv_auc, out / "train.png")
        report["png"] = str(out / "train.png")
    except OSError as exc:
        log.warning("train.png not written: %s", exc)
    return report


def write_train_png(y, scores, auc: float, path: Path) -> Path:  # noqa: ANN001 - numpy arrays
    """The ensemble's out-of-fold scores of the labelled hosts: their histogram by label, and the
    ROC curve they give (its area is the cross-validated AUC ``train`` reports)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from sklearn.metrics import roc_curve

    y = np.asarray(y).astype(int)
    fig, (hist, roc) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    bins = np.linspace(0.0, 1.0, 21)
    hist.hist([scores[y == 0], scores[y == 1]], bins=bins, label=[f"honest ({int((y == 0).sum())})",
              f"spam ({int(y.sum())})"], color=["tab:blue", "tab:red"], alpha=0.8)
    hist.set_xlabel("spam score (out of fold)")
    hist.set_ylabel("hosts (log scale: spam is rare)")
    hist.set_yscale("log")
    hist.legend(fontsize=8)
    fpr, tpr, _ = roc_curve(y, scores)
    roc.plot(fpr, tpr, color="tab:red", label=f"ensemble, CV AUC {auc:.3f}")
    roc.plot([0, 1], [0, 1], ":", color="grey", label="chance")
    roc.set_xlabel("false positive rate")
    roc.set_ylabel("true positive rate")
    roc.set_xlim(0, 1)
    roc.set_ylim(0, 1.01)
    roc.legend(fontsize=8, loc="lower right")
    for ax in (hist, roc):
        ax.grid(alpha=0.3)
    fig.suptitle("spam classifier, cross-validated on the labelled hosts", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def score(crawl_dir: Path, model_path: Path | None = None):
    """[(host, score)] by descending score for every host of DIR; written to DIR/spam/scores.parquet."""
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    model_path = model_path or spam_dir(crawl_dir) / "model.pkl"
    if not Path(model_path).is_file():
        raise UserError(f"model not found: {model_path} (run 'raycrawl spam train' first)")
    try:
        with open(model_path, "rb") as f:
            m = pickle.load(f)
        if not isinstance(m, dict) or not {"columns", "vocab"} <= m.keys():
            raise ValueError("not a raycrawl spam model")
    except (OSError, EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError,
            KeyError, pickle.UnpicklingError) as exc:
        raise UserError(f"--model {model_path}: not a model written by 'raycrawl spam train' ({exc})") from None
    table, terms = load_features(crawl_dir)
    missing = [c for c in m["columns"] if c not in table.column_names]
    if missing:
        raise UserError(f"features of {crawl_dir} lack columns the model needs: {missing[:5]}")
    data, _ = feature_data(table.select(m["columns"]), terms, m["vocab"])
    scores = m["ensemble"].predict(data)
    out = sorted(zip(table.column("host").to_pylist(), scores.tolist(), strict=True), key=lambda r: -r[1])
    pq.write_table(pa.Table.from_pylist([{"host": h, "score": s} for h, s in out]),
                   spam_dir(crawl_dir) / "scores.parquet")
    return out
