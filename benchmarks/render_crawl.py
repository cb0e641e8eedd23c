"""A crawl's rate with and without rendering, and its browsers' memory over a long rendering crawl
(issue 52).

Each run is ``raycrawl crawl`` as a user runs it over a fresh websim JavaScript web (``--scripts``:
a third of the plain hosts' pages make their content and links with scripts, a page per 100 hosts
that never loads and one that eats memory), with ``--render never`` and then ``--render auto``
(and ``always`` if asked). For each: pages, seconds, pages/s, rendered pages, the machine's CPU per
page (every process: /proc/stat), script-made links found against websim's manifest, websim's
politeness audit, and the browsers' memory (RSS of every Chromium process and the render actor),
sampled every 2 s: its median over the first and the last fifth of the crawl.

    .venv/bin/python benchmarks/render_crawl.py                                   # 300 hosts, never vs auto
    .venv/bin/python benchmarks/render_crawl.py --hosts 2000 --pages-per-host 6 --modes always   # ~10k rendered
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _crawl import crawl_cli  # noqa: E402

HOST_DELAY, IP_DELAY = 0.1, 0.0


def machine_cpu_s() -> float:
    """Seconds of CPU every process of the machine has used (user + nice + system + irq)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return ticks / os.sysconf("SC_CLK_TCK")


def browser_rss_mb() -> float:
    """Resident memory of every Chromium process and render actor on the machine."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes()
            if b"chrom" not in cmd.split(b"\0", 1)[0] and not cmd.startswith(b"ray::RenderActor"):
                continue
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def run(mode: str, args: argparse.Namespace, tmp: Path) -> dict:
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.websim import Websim

    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(2.0):
            samples.append(browser_rss_mb())

    with Websim(hosts=args.hosts, ips=args.ips, seed=args.seed, clean=True, scripts=True,
                pages_per_host_mean=args.pages_per_host, out_dir=tmp / f"web-{mode}") as web:
        manifest = web.manifest
        out = tmp / f"crawl-{mode}"
        watcher = threading.Thread(target=sample, daemon=True)
        cpu0, t0 = machine_cpu_s(), time.monotonic()
        watcher.start()
        try:
            report = crawl_cli({**os.environ, "RAY_AUTH_MODE": "disabled"}, web, out, "--render", mode,
                               "--seeds", str(web.seeds_file), host_delay=HOST_DELAY, ip_delay=IP_DELAY)
        finally:
            done.set()
            watcher.join()
        cpu, wall = machine_cpu_s() - cpu0, time.monotonic() - t0
        audit = web.audit(HOST_DELAY, IP_DELAY)
    rendered = {r.url: set(r.links) for r in iter_link_records(out, "rendered")}
    truth = found = 0
    for url, page in manifest.pages.items():
        kind = next((lab[3:] for lab in page["labels"] if lab.startswith("js:")), None)
        if kind is None or kind in ("hangs", "eats"):
            continue
        truth += len(page["links"])
        found += len(set(page["links"]) & rendered.get(url, set()))
    fifth = max(1, len(samples) // 5)
    return {"mode": mode, "pages": report["pages"], "seconds": report["elapsed_s"], "pages_per_s": report["pages_per_s"],
            "rendered": report.get("rendered", 0), "renders": report.get("render", {}).get("renders", 0),
            "render": {k: v for k, v in report.get("render", {}).items() if k != "renders"},
            "cpu_ms_per_page": round(1000 * cpu / max(1, report["pages"]), 2), "wall_s": round(wall, 1),
            "script_links": truth, "found": found, "violations": len(audit.violations),
            "browser_mb_first_fifth": round(statistics.median(samples[:fifth]), 1) if samples else 0.0,
            "browser_mb_last_fifth": round(statistics.median(samples[-fifth:]), 1) if samples else 0.0,
            "browser_mb_peak": round(max(samples), 1) if samples else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--ips", type=int, default=30)
    ap.add_argument("--pages-per-host", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--modes", default="never,auto")
    ap.add_argument("--keep", type=Path, default=None, help="crawl and websim directories here (kept), not in a temporary one")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="render-crawl-") as tmp:
        for mode in args.modes.split(","):
            rows.append(run(mode, args, args.keep or Path(tmp)))
            print(rows[-1], flush=True)
    cols = list(rows[0])
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if len(rows) > 1 and rows[0]["pages_per_s"]:
        print(f"\npages/s {rows[1]['mode']} / {rows[0]['mode']}: {rows[1]['pages_per_s'] / rows[0]['pages_per_s']:.2f}; "
              f"CPU per page {rows[1]['cpu_ms_per_page'] / rows[0]['cpu_ms_per_page']:.2f}x")


if __name__ == "__main__":
    main()
