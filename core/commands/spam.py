"""``raycrawl spam``: web spam features, training, scoring and labels (see docs/spam.md).

Sub-commands::

    raycrawl spam labels --manifest M [--out FILE]   websim ground truth as host<TAB>0|1
    raycrawl spam queries --manifest M [--out FILE]  websim's popular-query terms, one per line
    raycrawl spam features DIR [--queries FILE]      DIR/spam/features.parquet (+ pages, terms)
    raycrawl spam train DIR --labels FILE            DIR/spam/model.pkl, gate.json, train.json, train.png
    raycrawl spam score DIR [--model FILE]           DIR/spam/scores.parquet (+ top of the list)
    raycrawl spam temporal DIR1 DIR2 [DIR3 ...]      temporal features over crawls of one web, oldest
                                                     first -> the last one's spam/temporal.parquet

Files in ``DIR/spam/``: ``features.parquet`` (one row per host: ``host``, ``ip``, content and link
features), ``pages.parquet`` (page-local features of the sampled pages, for the crawl-time gate),
``terms.msgpack.gz`` (each host's term counts: its BM25 virtual document), ``queries.txt`` (the
query terms used), ``model.pkl``, ``gate.json``, ``train.json``, ``scores.parquet``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from raycrawl.argtypes import crawl_dir
from raycrawl.errors import UserError
from raycrawl.tasks.spam_pipeline import score, spam_dir, train, write_features

log = logging.getLogger(__name__)




def register(subparsers) -> None:
    p = subparsers.add_parser("spam", help="web spam: host features, ensemble classifier, scores",
                              description="Web spam scoring of a finished crawl (seed 003 part 2; docs/spam.md).")
    sub = p.add_subparsers(dest="spam_cmd", required=True)
    lab = sub.add_parser("labels", help="export websim's spam labels as host<TAB>0|1")
    lab.add_argument("--manifest", type=Path, required=True, help="websim manifest.jsonl.gz (or its directory)")
    lab.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    lab.set_defaults(func=handle_labels)
    q = sub.add_parser("queries", help="export websim's popular-query terms, one per line")
    q.add_argument("--manifest", type=Path, required=True)
    q.add_argument("--out", type=Path, default=None)
    q.set_defaults(func=handle_queries)
    f = sub.add_parser("features", help="compute per-host content, link and BM25 inputs into DIR/spam/")
    f.add_argument("dir", type=crawl_dir, help="crawl directory (links/ and warc/)")
    f.add_argument("--queries", type=Path, default=None,
                   help="popular-query terms, one per line (default: none; query features are then 0)")
    f.add_argument("--max-pages", type=int, default=400, help="pages sampled per host (default 400)")
    f.add_argument("--batch-hosts", type=int, default=64, help="hosts per Ray task (default 64)")
    f.add_argument("--no-ray", action="store_true", help="compute in this process instead of Ray tasks")
    f.set_defaults(func=handle_features)
    t = sub.add_parser("train", help="train the ensemble (and the crawl-time gate) on labelled hosts")
    t.add_argument("dir", type=crawl_dir)
    t.add_argument("--labels", type=Path, required=True, help="host<TAB>0|1 per line")
    t.add_argument("--sets", default="content,link,bm25", help="feature sets the ensemble may use (default all)")
    t.add_argument("--quick", action="store_true", help="fewer selection rounds (tests)")
    t.set_defaults(func=handle_train)
    s = sub.add_parser("score", help="score every host of DIR with a trained model")
    s.add_argument("dir", type=crawl_dir)
    s.add_argument("--model", type=Path, default=None, help="model.pkl (default DIR/spam/model.pkl)")
    s.add_argument("--top", type=int, default=10, help="print this many highest-scoring hosts")
    s.set_defaults(func=handle_score)
    tp = sub.add_parser("temporal", help="temporal link and content features over crawls of one web (seed 003 §3)")
    tp.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="crawl directories, oldest first (at least two; or one revisited by "
                    "'crawl --revisit': one snapshot per pass)")
    tp.add_argument("--fingerprints", type=int, default=100, help="PSimRank walk pairs per host (default 100)")
    tp.add_argument("--seed", type=int, default=0, help="seed of the PSimRank permutations")
    tp.add_argument("--no-content", action="store_true",
                    help="link features only (content ones need 'raycrawl spam features' on every DIR "
                         "that is not a periodic crawl)")
    tp.set_defaults(func=handle_temporal)


# ---------------------------------------------------------------------------- files
def read_labels(path: Path) -> dict[str, int]:
    """host -> 0|1 from a labels file; any malformed line is a UserError naming it."""
    if not path.is_file():
        raise UserError(f"labels file not found: {path}")
    out: dict[str, int] = {}
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) != 2 or parts[1] not in ("0", "1"):
            raise UserError(f"{path}:{n}: expected 'host<TAB>0|1', got {line[:80]!r}")
        out[parts[0].lower()] = int(parts[1])
    if not out:
        raise UserError(f"{path}: no labels")
    return out


def read_queries(path: Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    if not path.is_file():
        raise UserError(f"queries file not found: {path}")
    from raycrawl.text import tokens

    return frozenset(w for line in path.read_text(errors="replace").splitlines() for w in tokens(line))


# ---------------------------------------------------------------------------- handlers
def handle_labels(args: argparse.Namespace) -> int:
    from raycrawl.tasks.spam_websim import manifest_labels

    try:
        labels = manifest_labels(args.manifest)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    text = "".join(f"{h}\t{y}\n" for h, y in sorted(labels.items()))
    if args.out:
        args.out.write_text(text)
        print(f"{len(labels)} hosts ({sum(labels.values())} spam) -> {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def handle_queries(args: argparse.Namespace) -> int:
    from raycrawl.websim.manifest import load_manifest

    try:
        terms = load_manifest(args.manifest).meta.get("popular_terms") or []
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    text = "".join(f"{w}\n" for w in terms)
    if args.out:
        args.out.write_text(text)
        print(f"{len(terms)} query terms -> {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def handle_features(args: argparse.Namespace) -> int:
    path = write_features(args.dir, read_queries(args.queries), args.max_pages, args.batch_hosts, not args.no_ray)
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    print(f"spam features: {t.num_rows} hosts, {t.num_columns - 2} features -> {path}")
    return 0


def handle_train(args: argparse.Namespace) -> int:
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    r = train(args.dir, read_labels(args.labels), sets, args.quick)
    print(f"trained on {r['hosts']} hosts ({r['spam']} spam, {r['groups']} IP/domain groups): "
          f"ensemble 5-fold CV AUC {r['cv_auc']:.3f}, gate CV AUC {r['gate_cv_auc']:.3f}")
    for name, w in sorted(r["weights"].items(), key=lambda kv: -kv[1]):
        print(f"  {w:6.3f}  {name}  (CV AUC {r['model_cv_auc'][name]:.3f})")
    if r.get("png"):
        print(f"score histogram and ROC: {r['png']}")
    return 0


def handle_score(args: argparse.Namespace) -> int:
    out = score(args.dir, args.model)
    print(f"scored {len(out)} hosts -> {spam_dir(args.dir) / 'scores.parquet'}")
    for host, s in out[: args.top]:
        print(f"  {s:.3f}  {host}")
    return 0


def handle_temporal(args: argparse.Namespace) -> int:
    from raycrawl.tasks.spam_temporal_pipeline import write_temporal

    if args.fingerprints < 1:
        raise UserError(f"--fingerprints must be >= 1, got {args.fingerprints}")
    path = write_temporal(args.dirs, args.fingerprints, args.seed, not args.no_content)
    import json

    import pyarrow.parquet as pq

    t = pq.read_table(path)
    seconds = json.loads((path.parent / "temporal_seconds.json").read_text())
    print(f"temporal features: {t.num_rows} hosts over {len(args.dirs)} crawls, {t.num_columns - 2} link "
          f"features -> {path}")
    print("seconds per feature set: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """Features → train (quick, on websim's labels when its manifest sits next to the crawl) →
    score; returns the text to print."""
    crawl_dir = Path(crawl_dir)
    manifest = crawl_dir.parent / "websim" / "manifest.jsonl.gz"
    queries: frozenset[str] = frozenset()
    labels: dict[str, int] = {}
    if manifest.is_file():
        from raycrawl.tasks.spam_websim import manifest_labels
        from raycrawl.websim.manifest import load_manifest

        queries = frozenset(load_manifest(manifest).meta.get("popular_terms") or [])
        labels = manifest_labels(manifest)
    path = write_features(crawl_dir, queries)
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    lines = [f"features: {table.num_rows} hosts x {table.num_columns - 2} columns -> {path}"]
    crawled = {h: labels[h] for h in table.column("host").to_pylist() if h in labels}
    if not 0 < sum(crawled.values()) < len(crawled):
        lines.append("no websim labels with both classes next to this crawl: training skipped")
        return "\n".join(lines)
    r = train(crawl_dir, crawled, ["content", "link"], quick=True)
    lines.append(f"trained on {r['hosts']} hosts ({r['spam']} spam, {r['groups']} IP/domain groups): "
                 f"ensemble 5-fold CV AUC {r['cv_auc']:.3f}; gate CV AUC {r['gate_cv_auc']:.3f}")
    out = score(crawl_dir)
    lines.append("highest spam scores (label from websim):")
    lines += [f"  {s:.3f}  {h}  {'SPAM' if crawled.get(h) else 'honest'}" for h, s in out[:8]]
    return "\n".join(lines)
