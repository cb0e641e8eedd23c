"""The harvest of a live focused crawl, from its link records (seed 000's measure, live).

Every fetched URL has a link record with the time its response ended, the level it was fetched
from and the classifier's score of the page (:mod:`storage.link_records`). In fetch order, the
harvest rate after t records is (relevant pages among them) / t — every record counts, as every
node counts in the simulator and every record counts against ``--max-pages``. "Relevant" is the
classifier's judgement (score ≥ ½); a caller with ground truth passes its own rule to
:func:`harvest_curve` (benchmarks/focus_live.py does, with websim's page topics).

``DIR/focus/harvest.{tsv,json,png}`` are written at the end of a focused crawl, and plotted as
the simulator plots its curves (:func:`tasks.simulate.plot_harvest`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from raycrawl.storage.link_records import LinkRecord, iter_link_records


def fetch_order(crawl_dir: Path) -> list[LinkRecord]:
    """The crawl's link records in the order their responses ended."""
    return sorted(iter_link_records(crawl_dir), key=lambda r: r.time)


def judged_relevant(rec: LinkRecord) -> bool:
    return rec.score is not None and rec.score >= 0.5


def harvest_curve(recs: list[LinkRecord], relevant: Callable[[LinkRecord], bool], checkpoints: int = 200
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(pages fetched, relevant among them) at up to ``checkpoints`` points, the last one the end."""
    flags = np.fromiter((relevant(r) for r in recs), dtype=bool, count=len(recs))
    cum = np.cumsum(flags)
    every = max(1, len(recs) // checkpoints)
    pages = np.arange(every, len(recs) + 1, every)
    if len(recs) and (not len(pages) or pages[-1] != len(recs)):
        pages = np.append(pages, len(recs))
    return pages, cum[pages - 1] if len(pages) else np.zeros(0, dtype=np.int64)


def write_live_harvest(crawl_dir: Path, focus) -> dict:
    """``DIR/focus/harvest.{tsv,json,png}`` of a focused crawl (``focus``: its policy), relevance as
    its classifier judges; returns the JSON summary."""
    from raycrawl.tasks.simulate import plot_harvest

    crawl_dir = Path(crawl_dir)
    recs = fetch_order(crawl_dir)
    pages, rel = harvest_curve(recs, judged_relevant)
    out = crawl_dir / "focus"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "harvest.tsv", "w") as f:
        f.write("pages\trelevant\tharvest_rate\n")
        for p, r in zip(pages.tolist(), rel.tolist(), strict=True):
            f.write(f"{p}\t{r}\t{r / p:.6f}\n")
    levels = np.bincount([r.level for r in recs], minlength=focus.levels).tolist() if recs else []
    summary = {"policy": focus.policy, "levels": focus.levels, "relevance": focus.relevance, "fetched": len(recs),
               "fetched_per_level": levels, "relevant_judged": int(rel[-1]) if len(rel) else 0,
               "harvest_judged": float(rel[-1] / pages[-1]) if len(rel) else 0.0}
    (out / "harvest.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_harvest([(f"{focus.policy} live (classifier's judgement)", pages, rel / np.maximum(pages, 1))],
                 out / "harvest.png", f"live focused crawl: {focus.relevance}")
    return summary
