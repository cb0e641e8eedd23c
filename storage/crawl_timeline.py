"""The crawl timeline: the crawl's counters sampled as it runs, and their picture.

Every agent appends a row to ``OUT/timeline/AGENT.tsv`` each time it exports its metrics (about
every 2 s): the time, the whole crawl's pages and errors committed so far, and the frontier's
sizes, all read from Redis (so the agents' rows agree and a resumed run continues the same
series). At the end of every run ``OUT/crawl-timeline.png`` plots pages/s, queue sizes and
errors/s over time from all the rows.
"""

from __future__ import annotations

import time
from pathlib import Path

COLUMNS = ("time", "pages", "errors", "queued", "virtualized", "front", "inflight")


def record(directory: Path, agent: str, stats: dict[str, int], counts: dict[str, int]) -> None:
    """Append one sample (``stats``/``counts`` as RedisFrontier.stats()/counts() give them)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{agent}.tsv"
    errors = sum(n for k, n in stats.items() if k.startswith("error:"))
    row = (f"{time.time():.3f}", stats.get("pages", 0), errors, counts.get("queued", 0),
           counts.get("virtualized", 0), counts.get("front", 0), counts.get("inflight", 0))
    new = not path.exists()
    with path.open("a", encoding="utf-8") as fh:
        if new:
            fh.write("\t".join(COLUMNS) + "\n")
        fh.write("\t".join(map(str, row)) + "\n")


def read(directory: Path) -> list[tuple[float, ...]]:
    """Every agent's samples, by time (a torn last line, from a kill, is skipped)."""
    rows = []
    for path in sorted(Path(directory).glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) == len(COLUMNS):
                try:
                    rows.append(tuple(float(f) for f in fields))
                except ValueError:
                    continue
    return sorted(rows)


def write_png(directory: Path, path: Path) -> Path | None:
    """``path``: pages/s, queue sizes and errors/s over the crawl's time; None with under 2 samples."""
    rows = read(directory)
    if len(rows) < 2:
        return None
    import numpy as np
    from matplotlib.figure import Figure  # (not pyplot: no GUI backend, no global figure list, ~0.1 s less)

    a = np.array(rows)
    t = a[:, 0] - a[0, 0]
    dt = np.maximum(np.diff(a[:, 0]), 1e-3)
    mid = (t[1:] + t[:-1]) / 2
    # Several agents sample the same counters: a rate over a gap shorter than a tick is noise.
    keep = np.diff(a[:, 0]) > 0.5
    fig = Figure(figsize=(7, 7), dpi=100)
    axes = fig.subplots(3, 1, sharex=True)
    axes[0].plot(mid[keep], (np.diff(a[:, 1]) / dt)[keep], color="tab:blue")
    axes[0].set_ylabel("pages/s")
    for col, label in ((3, "queued URLs (Redis)"), (4, "virtualized URLs (disk)"), (5, "front (hosts)"),
                       (6, "in flight")):
        axes[1].plot(t, a[:, col], label=label)
    axes[1].set_ylabel("queue sizes")
    axes[1].legend(fontsize=8, loc="upper right")
    axes[2].plot(mid[keep], (np.diff(a[:, 2]) / dt)[keep], color="tab:red")
    axes[2].set_ylabel("errors/s")
    axes[2].set_xlabel("seconds since the first sample")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].set_title(f"crawl timeline: {int(a[-1, 1]):,} pages, {int(a[-1, 2]):,} errors", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return path
