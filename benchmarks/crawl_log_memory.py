"""The crawl log's derivation (storage/crawl_log.py) on a synthetic crawl of N pages: time and peak
memory of ``raycrawl log`` as pages grow, to show whether it is bounded.

Usage: .venv/bin/python benchmarks/crawl_log_memory.py [--pages 100000 300000 1000000] [--links 20]

The link records are generated (a crawl of N pages over N/10 hosts, ``--links`` out-links per
page, a tenth of them to pages never fetched, a redirect per 50 pages) into a temporary
directory (``$TMPDIR``, where the derivation works too); each size is derived by a fresh
``raycrawl log DIR --format heritrix`` whose own peak RSS is reported (``wait4``'s ``ru_maxrss`` of
that child; the crawl is generated in a child of its own, since a child forked from a large
process starts with that process's pages in its peak)."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from raycrawl.storage.link_records import LinkRecord, LinkRecordWriter


def make_crawl(out: Path, pages: int, links: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    hosts = max(1, pages // 10)
    url = [f"http://h{i % hosts}.test/p{i // hosts}" for i in range(pages)]
    (out / "seeds.txt").write_text(url[0] + "\n")
    w = LinkRecordWriter(out)
    t = 1.7e9
    batch = []
    for i in range(pages):
        t += 0.003
        outl = [url[rnd.randrange(min(pages, i + 200))] if rnd.random() < 0.9 else f"http://x{rnd.randrange(10**9)}.test/"
                for _ in range(links)]
        batch.append(LinkRecord(url[i], 200, "text/html", t, started=t - 0.01, ip="127.0.0.1", size=20_000,
                                links=outl, redirect=url[min(pages - 1, i + 1)] if i % 50 == 49 else None,
                                sha1="sha1:" + "A" * 32, warc=["a.warc.gz", i * 20_000], title=f"page {i}"))
        if len(batch) == 500:
            w.write_batch(batch)
            batch = []
    w.write_batch(batch)
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--links", type=int, default=20)
    args = ap.parse_args()
    print(f"{'pages':>10} {'seconds':>8} {'peak RSS MB':>12} {'B/page above 1st':>17} {'lines':>9}")
    first = None
    for n in args.pages:
        with tempfile.TemporaryDirectory(prefix="raycrawl-log-bench-") as d:
            out = Path(d)
            maker = multiprocessing.get_context("spawn").Process(target=make_crawl, args=(out, n, args.links))
            maker.start()
            maker.join()
            t0 = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "raycrawl", "log", str(out), "--format", "heritrix",
                                      "-o", str(out / "crawl.log")], stderr=subprocess.PIPE, text=True)
            _, status, usage = os.wait4(child.pid, 0)
            secs = time.perf_counter() - t0
            if status:
                sys.exit(child.stderr.read() if child.stderr else "raycrawl log failed")
            peak = usage.ru_maxrss
            with open(out / "crawl.log", "rb") as f:
                lines = sum(1 for _ in f)
            first = first or (n, peak)
            per = (peak - first[1]) * 1024 / (n - first[0]) if n > first[0] else float("nan")
            print(f"{n:>10,} {secs:>8.1f} {peak / 1024:>12.0f} {per:>17.0f} {lines:>9,}", flush=True)


if __name__ == "__main__":
    main()
