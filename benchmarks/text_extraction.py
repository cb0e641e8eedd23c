"""Page text for WET files: raycrawl's extraction (resiliparse's main-content plain text and
language, storage/wet.py) against trafilatura's (``extract``, its defaults, and its own language
guess left off), in the same run, on the same real pages (issue 54).

    .venv/bin/python benchmarks/text_extraction.py [--rounds 5]

The pages: the 32 real sites' pages in 8 languages of tests/data/readability-pages (Mozilla
Readability's test corpus, ~270 KB each). Reported: pages/s and CPU ms a page (best of the
rounds, each a pass over every page), the text's length, and how much of each extractor's words the
other's text has too (a crude agreement: both aim at the page's main text).
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = ROOT / "tests" / "data" / "readability-pages"
WORD = re.compile(r"\w+", re.UNICODE)


def pages() -> list[bytes]:
    rows = [line.split("\t")[0] for line in (PAGES / "languages.tsv").read_text().splitlines() if not line.startswith("#")]
    return [gzip.decompress((PAGES / f"{name}.html.gz").read_bytes()) for name in rows]


def raycrawl_text(body: bytes) -> str:
    from raycrawl.storage.wet import html_text, languages

    text = html_text(body, "text/html")
    languages(text)
    return text


def trafilatura_text(body: bytes) -> str:
    import trafilatura

    from raycrawl.text import decode_body

    return trafilatura.extract(decode_body(body, None)[0]) or ""


def run(extract, bodies: list[bytes], rounds: int) -> tuple[float, list[str]]:  # noqa: ANN001 - a function of a page
    best, texts = float("inf"), []
    for _ in range(rounds):
        t0 = time.process_time()
        texts = [extract(b) for b in bodies]
        best = min(best, time.process_time() - t0)
    return best, texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    bodies = pages()
    raycrawl_text(bodies[0]), trafilatura_text(bodies[0])  # (imports and first-call set-up out of the timing)
    ours_s, ours = run(raycrawl_text, bodies, args.rounds)
    theirs_s, theirs = run(trafilatura_text, bodies, args.rounds)
    shared = []
    for a, b in zip(ours, theirs, strict=True):
        wa, wb = set(WORD.findall(a.lower())), set(WORD.findall(b.lower()))
        shared.append((len(wa & wb) / max(1, len(wb)), len(wa & wb) / max(1, len(wa))))
    n = len(bodies)
    print(f"{n} pages, {sum(map(len, bodies)) / n / 1000:.0f} KB each on average; best of {args.rounds} rounds")
    print(f"{'extractor':34} {'pages/s':>8} {'CPU ms/page':>12} {'chars/page':>11}")
    print(f"{'raycrawl (resiliparse + language)':34} {n / ours_s:8.1f} {ours_s / n * 1000:12.2f} {sum(map(len, ours)) / n:11.0f}")
    print(f"{'trafilatura extract()':34} {n / theirs_s:8.1f} {theirs_s / n * 1000:12.2f} {sum(map(len, theirs)) / n:11.0f}")
    print(f"ratio (raycrawl's pages/s / trafilatura's): {theirs_s / ours_s:.1f}x")
    print(f"trafilatura's words found in raycrawl's text: {sum(s[0] for s in shared) / n:.0%} (mean per page); "
          f"raycrawl's words in trafilatura's: {sum(s[1] for s in shared) / n:.0%}")


if __name__ == "__main__":
    main()
