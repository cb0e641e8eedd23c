"""raycrawl vs Scrapy vs a bare aiohttp fetch loop, on the same websim, seeds, page budget and delays.

* raycrawl: ``raycrawl crawl`` with its default settings (embedded Redis, local Ray, every
  crawl-time stage on: WARC, link records, exact and near duplicates, summaries), host/IP delays
  from the end of responses, robots.txt obeyed.
* Scrapy, configured as its broad-crawl guide recommends (docs.scrapy.org, "Broad Crawls"):
  CONCURRENT_REQUESTS = 100, REACTOR_THREADPOOL_MAXSIZE = 20, COOKIES_ENABLED = False,
  RETRY_ENABLED = False, DOWNLOAD_TIMEOUT = 15, REDIRECT_ENABLED = False, AJAXCRAWL_ENABLED = True,
  breadth-first order (DEPTH_PRIORITY = 1 with FIFO queues), the DownloaderAwarePriorityQueue
  (Scrapy's default since 2.7), LOG_LEVEL = INFO; for the same politeness ROBOTSTXT_OBEY,
  DOWNLOAD_DELAY = host delay and CONCURRENT_REQUESTS_PER_DOMAIN = 1 (that queue cannot honour a
  per-IP limit, and Scrapy measures delays from request starts: its IP gaps show in the audit).
  .test names come from websim's hosts file (a pre-filled DNS cache); CLOSESPIDER_PAGECOUNT = budget.
* bare: the ceiling — aiohttp GETs of the manifest's allowed pages, one coroutine per IP honouring
  the same host and IP delays, no frontier, no parsing, no storage, no robots.txt.

The web is websim's ``clean`` profile by default (plain hosts, robots.txt allowing everything, no
traps, faults, hang hosts or Crawl-delays): nothing but politeness and the crawler bounds the rate.

Measured from websim's own request log, per run: **steady pages/s** over the window from the
10th to the 90th percentile of the page responses' end times (start-up, shutdown and stragglers
excluded), and **CPU ms per page** in the same window (every process of the crawler's session —
Ray workers and Redis included — sampled from /proc every 0.2 s; websim's own CPU not counted).
Reported separately: seconds from launch to the first request, the head (first request to the
10th percentile) and the tail (90th percentile to the last response). Each run is audited
(politeness, robots, duplicates) on its slice of the log. ``--repeats`` rounds, the crawlers'
order rotated each round; the median of each figure is printed.

    .venv/bin/python benchmarks/crawl_vs_scrapy.py                               # 200 hosts, 2000 pages, 3 rounds
    .venv/bin/python benchmarks/crawl_vs_scrapy.py --hosts 1000 --ips 100 --pages 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TICK = os.sysconf("SC_CLK_TCK")


def session_cpu(sid: int) -> dict[int, float]:
    """CPU seconds (user+system) of each live process in session ``sid``."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: session id
            out[int(d.name)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def machine_busy() -> float:
    """CPU seconds every core of the machine has spent not idle since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK  # all but idle and iowait (guest is in user)


def run_session(cmd: list[str], env: dict[str, str] | None = None,
                timeout: float = 1800) -> tuple[float, list[tuple[float, float]], int]:
    """Run ``cmd`` in a new session; return (wall s, [(time, CPU s of all its processes so far)]
    sampled every 0.2 s, exit code). Each sample also holds the machine's busy CPU seconds
    (:func:`machine_busy`: the crawler, the web server and everything else)."""
    t0 = time.time()
    cpu: dict[int, float] = {}
    series = [(t0, 0.0, machine_busy())]
    # stderr to a file: a crawler logging much (Scrapy at INFO) would fill a pipe and stall
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                                stderr=err_file, cwd=ROOT)
        while proc.poll() is None:
            for pid, c in session_cpu(proc.pid).items():
                cpu[pid] = max(c, cpu.get(pid, 0.0))
            series.append((time.time(), sum(cpu.values()), machine_busy()))
            time.sleep(0.2)
            if time.time() - t0 > timeout:
                os.killpg(proc.pid, 9)
        if proc.returncode:
            err_file.seek(0)
            print(err_file.read().decode(errors="replace")[-2000:], file=sys.stderr)
    return time.time() - t0, series, proc.returncode


def cpu_at(series: list[tuple[float, ...]], t: float, column: int = 1) -> float:
    """The session's CPU seconds at time ``t`` (linear between samples); ``column=2``: the
    machine's busy seconds."""
    for a, b in zip(series, series[1:], strict=False):
        if a[0] <= t <= b[0]:
            return a[column] + (b[column] - a[column]) * (t - a[0]) / max(1e-9, b[0] - a[0])
    return series[-1][column] if t > series[-1][0] else series[0][column]


# ---- Scrapy (run in a subprocess: python crawl_vs_scrapy.py --scrapy ARGS) ---------------------------
def scrapy_main(seeds: list[str], hosts_file: str, pages: int, host_delay: float, user_agent: str) -> None:
    import scrapy
    import scrapy.resolver as resolver
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor

    for line in Path(hosts_file).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#"):
            for name in parts[1:]:
                resolver.dnscache[name] = parts[0]

    class Everything(scrapy.Spider):
        name = "everything"
        start_urls = seeds
        extractor = LinkExtractor()

        def parse(self, response):
            if not hasattr(response, "text"):
                return
            for link in self.extractor.extract_links(response):
                yield scrapy.Request(link.url, callback=self.parse)

    process = CrawlerProcess(settings={
        # the broad-crawl guide's recommendations
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue", "CONCURRENT_REQUESTS": 100,
        "REACTOR_THREADPOOL_MAXSIZE": 20, "LOG_LEVEL": "INFO", "COOKIES_ENABLED": False, "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 15, "REDIRECT_ENABLED": False, "AJAXCRAWL_ENABLED": True, "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        # the same politeness and budget as the others
        "ROBOTSTXT_OBEY": True, "USER_AGENT": user_agent, "DOWNLOAD_DELAY": host_delay,
        "RANDOMIZE_DOWNLOAD_DELAY": False, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "CLOSESPIDER_PAGECOUNT": pages,
        "DNSCACHE_ENABLED": True, "DNSCACHE_SIZE": 100_000, "TELNETCONSOLE_ENABLED": False,
    })
    process.crawl(Everything)
    process.start()


# ---- the bare aiohttp ceiling ---------------------------------------------------------------------------
async def bare_main(manifest_path: str, hosts_file: str, port: int, pages: int, host_delay: float,
                    ip_delay: float) -> None:
    from collections import defaultdict
    from urllib.parse import urlsplit

    import aiohttp

    from raycrawl.websim import load_manifest

    m = load_manifest(manifest_path)
    ip_of = {}
    for line in Path(hosts_file).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#"):
            ip_of.update({n: parts[0] for n in parts[1:]})
    per_ip: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for p in m.html_pages():
        url = p["url"]
        if m.allowed(url):
            host = urlsplit(url).hostname
            per_ip[ip_of[host]][host].append(url)
    left = [pages]

    async def worker(ip: str, hosts: dict[str, list[str]], session: aiohttp.ClientSession) -> None:
        ready = dict.fromkeys(hosts, 0.0)
        ip_ready = 0.0
        while left[0] > 0 and any(hosts.values()):
            host = min((h for h in hosts if hosts[h]), key=lambda h: ready[h])
            wait = max(ready[host], ip_ready) - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            left[0] -= 1
            url = hosts[host].pop(0)
            parts = urlsplit(url)
            try:
                async with session.get(f"http://{ip}:{parts.port or 80}{parts.path}"
                                       + (f"?{parts.query}" if parts.query else ""),
                                       headers={"Host": parts.netloc}, allow_redirects=False) as r:
                    await r.read()
            except (aiohttp.ClientError, TimeoutError):
                pass
            end = time.time()
            ready[host] = end + host_delay
            ip_ready = end + ip_delay

    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*(worker(ip, hosts, s) for ip, hosts in per_ip.items()))


# ---- driver -----------------------------------------------------------------------------------------------
def window_stats(web, t0: float, t1: float, series: list[tuple[float, float]] | None, host_delay: float,
                 ip_delay: float) -> dict:
    """Steady-state figures of one run from websim's log slice [t0, t1] (see the module doc)."""
    from raycrawl.websim import audit

    recs = [r for r in web.requests() if t0 <= r.start <= t1]
    ends = sorted(r.end for r in recs if "robots" not in r.target and r.status > 0)
    if len(ends) < 20:
        return {"pages": len(ends), "steady_pages_per_s": 0.0, "violations": None}
    i10, i90 = len(ends) // 10, (9 * len(ends)) // 10
    span = ends[i90] - ends[i10]
    cpu = cpu_at(series, ends[i90]) - cpu_at(series, ends[i10]) if series else float("nan")
    busy = (cpu_at(series, ends[i90], 2) - cpu_at(series, ends[i10], 2)) / span if series else float("nan")
    rep = audit(recs, web.manifest, host_delay, ip_delay)
    kinds: dict[str, int] = {}
    for v in rep.violations:
        kinds[v.kind] = kinds.get(v.kind, 0) + 1
    first = min(r.start for r in recs)
    return {"pages": len(ends), "steady_pages_per_s": round((i90 - i10) / span, 1),
            "cpu_ms_per_page": round(1000 * cpu / (i90 - i10), 2), "machine_busy_cores": round(busy, 2),
            "to_first_request_s": round(first - t0, 2),
            "head_s": round(ends[i10] - first, 2), "steady_s": round(span, 2), "tail_s": round(ends[-1] - ends[i90], 2),
            "violations": kinds}


def median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--ips", type=int, default=20)
    ap.add_argument("--pages", type=int, default=2000, help="page budget of each crawler")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--repeats", type=int, default=3, help="rounds, the crawlers' order rotated each round")
    ap.add_argument("--full-web", action="store_true", help="websim's full web (traps, faults, hang hosts) "
                    "instead of the clean profile")
    ap.add_argument("--only", default="raycrawl,scrapy,bare")
    ap.add_argument("--raycrawl-args", default="", help="extra settings flags for raycrawl (experiments; "
                    "the headline uses the defaults)")
    ap.add_argument("--scrapy", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--bare", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scrapy:
        seeds, hosts_file, pages, hd, ua = args.scrapy
        scrapy_main(json.loads(seeds), hosts_file, int(pages), float(hd), ua)
        return
    if args.bare:
        mpath, hosts_file, port, pages, hd, ipd = args.bare
        asyncio.run(bare_main(mpath, hosts_file, int(port), int(pages), float(hd), float(ipd)))
        return

    from raycrawl.websim import Websim

    # (an earlier commit's code first when benchmarks/code_at.py's PYTHONPATH is given)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))}
    ua = "raycrawl/0.1 (+http://raycrawl.test/bot)"
    names = args.only.split(",")
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=args.ips, seed=3, clean=not args.full_web,
                                                      out_dir=Path(tmp) / "web") as web:
        for r in range(args.repeats):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                cmds = {
                    "raycrawl": [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
                                 str(Path(tmp) / f"crawl{r}"), "--resolve", str(web.hosts_file), "--allow-networks",
                                 "127.0.0.0/8", "--host-delay", str(args.host_delay), "--ip-delay",
                                 str(args.ip_delay), "--max-pages", str(args.pages), "--max-urls-per-host", "1000",
                                 *args.raycrawl_args.split()],
                    "scrapy": [sys.executable, __file__, "--scrapy", json.dumps(web.seeds()), str(web.hosts_file),
                               str(args.pages), str(args.host_delay), ua],
                    "bare": [sys.executable, __file__, "--bare", str(web.manifest_path), str(web.hosts_file),
                             str(web.port), str(args.pages), str(args.host_delay), str(args.ip_delay)],
                }
                time.sleep(2)  # the previous crawler's last connections close
                web.flush_log()
                t0 = time.time()
                wall, series, rc = run_session(cmds[name], env)
                web.flush_log()
                stats = window_stats(web, t0, time.time(), series, args.host_delay, args.ip_delay)
                stats.update({"round": r, "wall_s": round(wall, 1), "cpu_s": round(series[-1][1], 1), "exit": rc})
                runs[name].append(stats)
                print(name, json.dumps(stats), file=sys.stderr, flush=True)
    web_kind = "full web (traps, faults, hang hosts)" if args.full_web else "clean profile"
    print(f"websim {args.hosts} hosts / {args.ips} IPs ({web_kind}), budget {args.pages} pages, host delay "
          f"{args.host_delay} s, IP delay {args.ip_delay} s; medians of {args.repeats} rounds, order rotated")
    cols = ("pages", "steady_pages_per_s", "cpu_ms_per_page", "machine_busy_cores", "to_first_request_s", "head_s", "steady_s", "tail_s",
            "wall_s")
    print(f"{'crawler':<10} " + " ".join(f"{c:>18}" for c in cols) + "  violations (each round)")
    med: dict[str, dict[str, float]] = {}
    for name, rs in runs.items():
        med[name] = {c: median([x.get(c) or 0 for x in rs]) for c in cols}
        print(f"{name:<10} " + " ".join(f"{med[name][c]:>18}" for c in cols) + "  "
              + "; ".join(json.dumps(x["violations"]) for x in rs))
    if "raycrawl" in med:
        ours = med["raycrawl"]
        for peer in ("scrapy", "bare"):
            if peer in med and med[peer]["steady_pages_per_s"]:
                print(f"raycrawl / {peer}: steady pages/s ×{ours['steady_pages_per_s'] / med[peer]['steady_pages_per_s']:.2f}, "
                      f"CPU ms/page ×{ours['cpu_ms_per_page'] / (med[peer]['cpu_ms_per_page'] or 1):.2f}")


if __name__ == "__main__":
    main()
