"""The crawl timeline: the crawl's counters sampled as it runs, and their picture.

Every agent appends a row to ``OUT/timeline/AGENT.tsv`` each time it exports its metrics (about
every 2 s): the time, the whole crawl's pages and errors committed so far, and the frontier's
sizes, all read from Redis (so the agents' rows agree and a resumed run continues the same
series). At the end of every run ``OUT/crawl-timeline.png`` plots pages/s, queue sizes and
errors/s over time from all the rows.
"""

from __future__ import annotations

import math
import time
from itertools import pairwise
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


# The picture is drawn with Pillow, not matplotlib: every run of every crawl ends with it, and there
# matplotlib's import alone cost the driver 0.44 CPU-s of the picture's 0.70, a third of a small
# crawl's driver (Pillow's: 0.11 all told; benchmarks/timeline_png.py).
SIZE = (700, 700)
SCALE = 2  # drawn twice as large, then scaled down: smooth lines and text
MARGIN = (70, 40, 16, 48)  # left, top, right, bottom (pixels)
GAP = 24  # between panels
BLUE, ORANGE, GREEN, RED = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"
GRID, INK = "#e4e4e4", "#262626"
QUEUES = ((3, "queued URLs (Redis)", BLUE), (4, "virtualized URLs (disk)", ORANGE), (5, "front (hosts)", GREEN),
          (6, "in flight", RED))


def ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart), about ``n``, the first at or below
    ``lo`` and the last at or above ``hi``: an axis's range."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [i * step for i in range(first, last + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:,.2f}".rstrip("0").rstrip(".")


def write_png(directory: Path, path: Path) -> Path | None:
    """``path``: pages/s, queue sizes and errors/s over the crawl's time; None with under 2 samples."""
    rows = read(directory)
    if len(rows) < 2:
        return None
    from PIL import Image, ImageDraw, ImageFont

    t0 = rows[0][0]
    # Several agents sample the same counters: a rate over a gap shorter than a tick is noise.
    pages, errors = [], []
    for a, b in pairwise(rows):
        dt = b[0] - a[0]
        if dt > 0.5:
            mid = (a[0] + b[0]) / 2 - t0
            pages.append((mid, (b[1] - a[1]) / dt))
            errors.append((mid, (b[2] - a[2]) / dt))
    panels = (("pages/s", [("", BLUE, pages)]),
              ("queue sizes", [(label, colour, [(r[0] - t0, r[col]) for r in rows]) for col, label, colour in QUEUES]),
              ("errors/s", [("", RED, errors)]))
    k = SCALE
    image = Image.new("RGB", (SIZE[0] * k, SIZE[1] * k), "white")
    draw = ImageDraw.Draw(image)
    font, small = ImageFont.load_default(size=12 * k), ImageFont.load_default(size=10 * k)
    left, top, right, bottom = (m * k for m in MARGIN)
    width = image.width - left - right
    height = (image.height - top - bottom - 2 * GAP * k) / 3
    xs = ticks(0.0, max(rows[-1][0] - t0, 1.0))
    x_max = xs[-1]

    def x_at(t: float) -> float:
        return left + width * t / x_max

    title = f"crawl timeline: {int(rows[-1][1]):,} pages, {int(rows[-1][2]):,} errors"
    draw.text((left + width / 2, top / 2), title, fill=INK, font=font, anchor="mm")
    for n, (name, series) in enumerate(panels):
        y0 = top + n * (height + GAP * k)
        values = [v for _, _, points in series for _, v in points]
        ys = ticks(min([0.0, *values]), max([1.0, *values]))

        def y_at(v: float, y0: float = y0, lo: float = ys[0], hi: float = ys[-1]) -> float:
            return y0 + height - height * (v - lo) / (hi - lo)

        for v in ys:
            draw.line([(left, y_at(v)), (left + width, y_at(v))], fill=GRID)
            draw.text((left - 6 * k, y_at(v)), _label(v), fill=INK, font=small, anchor="rm")
        for t in xs:
            draw.line([(x_at(t), y0), (x_at(t), y0 + height)], fill=GRID)
        for _, colour, points in series:
            if len(points) > 1:
                draw.line([(x_at(t), y_at(v)) for t, v in points], fill=colour, width=2 * k, joint="curve")
            elif points:
                t, v = points[0]
                draw.ellipse([x_at(t) - 2 * k, y_at(v) - 2 * k, x_at(t) + 2 * k, y_at(v) + 2 * k], fill=colour)
        draw.rectangle([left, y0, left + width, y0 + height], outline=INK, width=k)
        # the panel's name along its left edge, as an axis label
        box = draw.textbbox((0, 0), name, font=font)
        axis = Image.new("L", (box[2] + 2, box[3] + 2), 0)
        ImageDraw.Draw(axis).text((1, 1), name, fill=255, font=font)
        axis = axis.rotate(90, expand=True)
        image.paste(INK, (4 * k, int(y0 + (height - axis.height) / 2)), axis)
        named = [(label, colour) for label, colour, _ in series if label]
        if named:  # a legend, top right
            line = 14 * k
            box_w = 30 * k + max(draw.textlength(label, font=small) for label, _ in named)
            bx, by = left + width - box_w - 8 * k, y0 + 6 * k
            draw.rectangle([bx, by, bx + box_w, by + line * len(named) + 4 * k], fill="white", outline=GRID, width=k)
            for i, (label, colour) in enumerate(named):
                yy = by + 2 * k + line * i + line / 2
                draw.line([(bx + 4 * k, yy), (bx + 22 * k, yy)], fill=colour, width=2 * k)
                draw.text((bx + 26 * k, yy), label, fill=INK, font=small, anchor="lm")
    y_end = top + 3 * height + 2 * GAP * k
    for t in xs:
        draw.text((x_at(t), y_end + 4 * k), _label(t), fill=INK, font=small, anchor="mt")
    draw.text((left + width / 2, image.height - 10 * k), "seconds since the first sample", fill=INK, font=font, anchor="ms")
    image.resize(SIZE, Image.Resampling.LANCZOS).save(path)
    return path
