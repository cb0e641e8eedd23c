"""Temporal spam features over several crawls of one web (seed 003 §3): ``raycrawl spam temporal
DIR1 DIR2 [DIR3 …]``, oldest first.

Link features (tasks/spam_temporal.py) come from each crawl's host graph; content features
(tasks/spam_temporal_content.py) from each crawl's per-host term counts, which ``raycrawl spam
features DIR`` stores in ``DIR/spam/terms.msgpack.gz`` (a crawl without them is a user error
when content features are asked for). Written to the last crawl's ``spam/``:
``temporal.parquet`` (one row per host: ``host``, ``snapshots`` seen, then every link feature,
NaN where missing), ``temporal_content.npz`` (hosts × 5·V sparse matrix, ``temporal_content.json``
naming its hosts and columns) and ``temporal_seconds.json`` (time per feature set).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from raycrawl.errors import UserError
from raycrawl.storage.crawl_epochs import View, views

log = logging.getLogger(__name__)


def read_terms(view: View, max_pages: int = 400) -> dict[str, Counter]:
    """Each host's term counts in a crawl (``raycrawl spam features DIR`` stored them), or in one
    pass of a periodic crawl (its snapshot), counted here as spam features counts them."""
    from raycrawl.tasks.spam_pipeline import load_terms

    if view.snapshot is not None:
        from raycrawl.tasks.spam_features import count_batch, scan_records

        hosts, _ = scan_records(view.records(), max_pages)
        return count_batch(str(view.dir), list(hosts.values()))[3]
    try:
        return load_terms(view.dir)
    except UserError as e:
        raise UserError(f"{e} (or --no-content)") from None


def temporal_features(crawl_dirs: Sequence[Path], fingerprints: int = 100, seed: int = 0, content: bool = True,
                      max_terms: int = 10_000) -> dict:
    """{hosts, snapshots (per host), link: {set: {feature: values}}, content: (vocab, {group: matrix},
    missing) or None, seconds: {set: s}} over the crawls, oldest first."""
    from raycrawl.tasks.spam_link_features import host_graph
    from raycrawl.tasks.spam_temporal import temporal_link_features
    from raycrawl.tasks.spam_temporal_content import temporal_content_features

    dirs = [Path(d) for d in crawl_dirs]
    for d in dirs:
        if not d.is_dir():
            raise UserError(f"crawl directory not found: {d}")
    # A periodic crawl (crawl --revisit) is one snapshot per pass.
    shots = views(dirs)
    if len(shots) < 2:
        raise UserError("temporal features need at least two snapshots: two crawl directories of one web, "
                        "oldest first, or a crawl revisited by 'raycrawl crawl --revisit'")
    graphs = []
    for shot in shots:
        hosts, src, dst, _ = host_graph(shot.dir, shot.records())
        if not hosts:
            raise UserError(f"{shot.name}: no link records (is it a crawl directory?)")
        graphs.append((hosts, src, dst))
    seconds: dict[str, float] = {}
    hosts, link = temporal_link_features(graphs, fingerprints, seed, seconds=seconds)
    seen = {h: 0 for h in hosts}
    for hs, _, _ in graphs:
        for h in hs:
            seen[h] += 1
    out = {"hosts": hosts, "snapshots": [seen[h] for h in hosts], "link": link, "content": None,
           "seconds": seconds}
    if content:
        host_terms = [read_terms(shot) for shot in shots]
        t0 = time.perf_counter()
        c_hosts, vocab, groups, missing = temporal_content_features(host_terms, max_terms)
        seconds["temporal_content"] = time.perf_counter() - t0
        out["content"] = (c_hosts, vocab, groups, missing)
    return out


def write_temporal(crawl_dirs: Sequence[Path], fingerprints: int = 100, seed: int = 0, content: bool = True) -> Path:
    """Compute :func:`temporal_features` and write them under the last crawl's ``spam/``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from scipy import sparse

    from raycrawl.tasks.spam_pipeline import spam_dir

    res = temporal_features(crawl_dirs, fingerprints, seed, content)
    out = spam_dir(Path(crawl_dirs[-1]))
    out.mkdir(parents=True, exist_ok=True)
    cols = {"host": res["hosts"], "snapshots": res["snapshots"]}
    for feats in res["link"].values():
        cols.update({k: np.asarray(v, dtype=np.float64) for k, v in feats.items()})
    pq.write_table(pa.table(cols), out / "temporal.parquet")
    if res["content"] is not None:
        c_hosts, vocab, groups, missing = res["content"]
        names = list(groups)
        sparse.save_npz(out / "temporal_content.npz", sparse.hstack([groups[g] for g in names]).tocsr())
        (out / "temporal_content.json").write_text(json.dumps(
            {"hosts": c_hosts, "groups": names, "terms": vocab, "missing": [bool(m) for m in missing]}))
    (out / "temporal_seconds.json").write_text(json.dumps(res["seconds"], indent=1))
    log.info("temporal spam features of %d hosts over %d crawls -> %s", len(res["hosts"]), len(crawl_dirs), out)
    return out / "temporal.parquet"
