"""The crawl-timeline picture (storage/crawl_timeline.py), drawn with Pillow: its axes' round values
are matplotlib's (MaxNLocator with the same steps, an independent implementation), and the picture
of a timeline is a real one, whatever its samples (a counter going back after a resume included)."""

from __future__ import annotations

import random

import pytest
from png_check import assert_picture

from raycrawl.storage.crawl_timeline import COLUMNS, ticks, write_png


def test_axis_values_are_matplotlibs() -> None:
    from matplotlib.ticker import MaxNLocator

    locator = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])
    rng = random.Random(7)
    for _ in range(2000):
        hi = 10 ** rng.uniform(-2, 7)
        lo = -hi * rng.random() if rng.random() < 0.3 else 0.0
        assert ticks(lo, hi) == pytest.approx(list(locator.tick_values(lo, hi)), rel=1e-9, abs=1e-12), (lo, hi)


@pytest.mark.parametrize("rows", [
    [(0, 0, 0, 2, 0, 1, 0), (2, 62, 0, 0, 0, 0, 0)],  # a crawl of two samples
    [(2 * i, 150 * i, i // 3, 500 - i, i, 40, 8) for i in range(400)],
    [(0, 10, 0, 0, 0, 0, 0), (2, 5, 0, 0, 0, 0, 0), (4, 5, 1, 0, 0, 0, 0)],  # a negative rate
])
def test_the_picture_of_a_timeline(tmp_path, rows) -> None:
    (tmp_path / "agent0.tsv").write_text("\t".join(COLUMNS) + "\n" + "".join(
        "\t".join(str(v) for v in (1.8e9 + r[0], *r[1:])) + "\n" for r in rows))
    assert write_png(tmp_path, tmp_path / "t.png") == tmp_path / "t.png"
    assert_picture(tmp_path / "t.png")


def test_no_picture_from_one_sample(tmp_path) -> None:
    (tmp_path / "agent0.tsv").write_text("\t".join(COLUMNS) + "\n" + "\t".join(["1.8e9"] + ["0"] * 6) + "\n")
    assert write_png(tmp_path, tmp_path / "t.png") is None and not (tmp_path / "t.png").exists()
