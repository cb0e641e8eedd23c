"""What Common Crawl's formats cost a crawl (issue 54): the machine CPU per page of a websim crawl
with default settings, then what ``raycrawl warc cc-index OUT`` (the WET and WAT files, then the
columnar index) adds per page, in the same run; and, in-process over the crawl's WARC files, how
that pass splits between reading the archive back (what writing the files at crawl time would
save) and the per-page work (text, language, the WAT's metadata: what it would move into the
crawl's parsing workers, whose CPU sets the crawl's pages/s on a small machine).

    .venv/bin/python benchmarks/cc_formats_cost.py [--hosts 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _crawl import crawl_cli  # noqa: E402
from suite_cpu import busy_seconds  # noqa: E402


def split(crawl_dir: Path, rounds: int) -> dict[str, float]:
    """CPU seconds (best of ``rounds``): the whole pass in this process (its imports done: what it
    costs beyond its start), reading every HTML page back from the WARC files, and the per-page work
    of the WET and WAT records on bodies already in memory; and the pages."""
    from raycrawl.storage.cc_index import write_cc_index
    from raycrawl.storage.warc import warc_files
    from raycrawl.storage.wat import html_metadata
    from raycrawl.storage.wet import _pages, html_text, languages

    warc_dir = crawl_dir / "warc"
    best = {"pass": float("inf"), "read": float("inf"), "work": float("inf")}
    pages: list[tuple[bytes, str]] = []
    for _ in range(rounds):
        t = time.process_time()
        write_cc_index(crawl_dir, "BENCH")
        best["pass"] = min(best["pass"], time.process_time() - t)
        t, pages = time.process_time(), []
        for warc in warc_files(warc_dir):
            pages += [(body, rec.http_headers.get("Content-Type") or "") for rec, body in _pages(warc)]
        best["read"] = min(best["read"], time.process_time() - t)
        t = time.process_time()
        for body, ctype in pages:
            languages(html_text(body, ctype))
            html_metadata(body, ctype)
        best["work"] = min(best["work"], time.process_time() - t)
    return {**best, "pages": len(pages)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from raycrawl.websim import Websim

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "crawl"
        with Websim(hosts=args.hosts, ips=max(1, args.hosts // 10), seed=3, clean=True, pages_per_host_mean=10,
                    out_dir=Path(tmp) / "web") as web:
            b0 = busy_seconds()
            report = crawl_cli(env, web, out, "--seeds", str(web.seeds_file), "--max-urls-per-host", "40", host_delay=0.05, ip_delay=0.0)
            crawl_cpu = busy_seconds() - b0
        pages = report["pages"]
        b0, t0 = busy_seconds(), time.monotonic()
        subprocess.run([sys.executable, "-m", "raycrawl", "warc", "cc-index", str(out)], env=env, check=True,
                       capture_output=True, cwd=ROOT)
        pass_cpu, pass_wall = busy_seconds() - b0, time.monotonic() - t0
        parts = split(out, args.rounds)
    print(f"crawl: {pages} pages, machine CPU {crawl_cpu:.1f} s = {1000 * crawl_cpu / pages:.2f} ms/page "
          f"(start-up included)")
    print(f"`warc cc-index` afterwards (WET + WAT + the columnar index): {pass_cpu:.1f} CPU-s, {pass_wall:.1f} s "
          f"= {1000 * pass_cpu / pages:.2f} ms/page more ({100 * pass_cpu / crawl_cpu:.0f} % of the crawl's)")
    n = parts["pages"]
    print(f"the pass in-process, its imports done (best of {args.rounds}): {1000 * parts['pass'] / pages:.2f} ms/page")
    print(f"of which, over the {n} HTML pages: reading them back "
          f"{1000 * parts['read'] / n:.3f} ms/page, their text + language + WAT metadata "
          f"{1000 * parts['work'] / n:.3f} ms/page")


if __name__ == "__main__":
    main()
