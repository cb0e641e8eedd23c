"""Languages of real pages (storage/wet.py, issue 54): 32 pages of real sites in 8 languages
(tests/data/readability-pages, with their known languages) are ≥ 95 % detected as their known
language from the text their WET record holds."""

from __future__ import annotations

import gzip
from pathlib import Path

PAGES = Path(__file__).parent / "data" / "readability-pages"


def test_real_pages_languages_are_their_known_ones() -> None:
    import pycountry

    from raycrawl.storage.wet import html_text, languages

    rows = [line.split("\t") for line in (PAGES / "languages.tsv").read_text().splitlines() if not line.startswith("#")]
    wrong = []
    for name, known, _ in rows:
        text = html_text(gzip.decompress((PAGES / f"{name}.html.gz").read_bytes()), "text/html")
        got = languages(text)
        if got != (pycountry.languages.get(alpha_2=known).alpha_3,):
            wrong.append((name, known, got))
    assert len(rows) == 32 and len({known for _, known, _ in rows}) == 8
    assert len(wrong) <= 0.05 * len(rows), wrong
