"""raycrawl vs Scrapy vs a bare aiohttp fetch loop, on the same websim, seeds, page budget and delays.

* raycrawl: ``raycrawl crawl`` (embedded Redis, local Ray), host/IP delays from the end of responses,
  robots.txt obeyed.
* Scrapy: a CrawlerProcess in a subprocess, configured as closely as it allows: ROBOTSTXT_OBEY,
  DOWNLOAD_DELAY = host delay with one request per domain (Scrapy cannot also enforce a per-IP
  delay, and it measures delays from request starts), CLOSESPIDER_PAGECOUNT = budget, .test names
  answered from websim's hosts file (pre-filled DNS cache), all links followed.
* bare: the ceiling — aiohttp GETs of the manifest's allowed pages, one coroutine per IP honouring
  the same host and IP delays, no frontier, no parsing, no storage, no robots.txt.

Each runs in its own process session; CPU seconds are summed over every process of the session
(Ray workers and Redis included) by sampling /proc. Pages/s = pages answered / time from the first
request to the last response in websim's request log; each run is also audited (politeness,
robots, duplicates) on its own slice of the log.

    .venv/bin/python benchmarks/crawl_vs_scrapy.py                       # 200 hosts, 1000 pages
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


def run_session(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 1800) -> tuple[float, float, int]:
    """Run ``cmd`` in a new session; return (wall s, CPU s of all its processes, exit code)."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT)
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        for pid, c in session_cpu(proc.pid).items():
            cpu[pid] = max(c, cpu.get(pid, 0.0))
        time.sleep(0.2)
        if time.time() - t0 > timeout:
            os.killpg(proc.pid, 9)
    # the leader itself, reaped: its own final usage
    total = sum(cpu.values())
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode:
        print(err[-2000:], file=sys.stderr)
    return time.time() - t0, total, proc.returncode


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
        "ROBOTSTXT_OBEY": True, "USER_AGENT": user_agent, "DOWNLOAD_DELAY": host_delay,
        "RANDOMIZE_DOWNLOAD_DELAY": False, "CONCURRENT_REQUESTS": 256, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CLOSESPIDER_PAGECOUNT": pages, "RETRY_TIMES": 2, "DOWNLOAD_TIMEOUT": 15, "LOG_LEVEL": "ERROR",
        "DNSCACHE_ENABLED": True, "DNSCACHE_SIZE": 100_000, "REDIRECT_ENABLED": True,
        "DOWNLOAD_MAXSIZE": 4 * 1024 * 1024, "TELNETCONSOLE_ENABLED": False, "COOKIES_ENABLED": False,
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
def window_stats(web, t0: float, t1: float, host_delay: float, ip_delay: float) -> dict:
    from raycrawl.websim import audit

    recs = [r for r in web.requests() if t0 <= r.start <= t1]
    pages = [r for r in recs if "robots" not in r.target and r.status > 0]
    if not pages:
        return {"pages": 0, "pages_per_s": 0.0, "violations": None}
    span = max(r.end for r in recs) - min(r.start for r in recs)
    rep = audit(recs, web.manifest, host_delay, ip_delay)
    kinds: dict[str, int] = {}
    for v in rep.violations:
        kinds[v.kind] = kinds.get(v.kind, 0) + 1
    return {"pages": len(pages), "span_s": round(span, 2), "pages_per_s": round(len(pages) / span, 1),
            "violations": kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--ips", type=int, default=20)
    ap.add_argument("--pages", type=int, default=1000, help="page budget of each crawler")
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--only", default="raycrawl,scrapy,bare")
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

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    ua = "raycrawl/0.1 (+http://raycrawl.test/bot)"
    results = {}
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=args.ips, seed=3,
                                                      out_dir=Path(tmp) / "web") as web:
        cmds = {
            "raycrawl": [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
                         str(Path(tmp) / "crawl"), "--resolve", str(web.hosts_file), "--allow-networks",
                         "127.0.0.0/8", "--host-delay", str(args.host_delay), "--ip-delay", str(args.ip_delay),
                         "--max-pages", str(args.pages), "--max-urls-per-host", "1000"],
            "scrapy": [sys.executable, __file__, "--scrapy", json.dumps(web.seeds()), str(web.hosts_file),
                       str(args.pages), str(args.host_delay), ua],
            "bare": [sys.executable, __file__, "--bare", str(web.manifest_path), str(web.hosts_file),
                     str(web.port), str(args.pages), str(args.host_delay), str(args.ip_delay)],
        }
        for name in args.only.split(","):
            t0 = time.time()
            wall, cpu, rc = run_session(cmds[name], env)
            stats = window_stats(web, t0, time.time(), args.host_delay, args.ip_delay)
            stats.update({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": rc,
                          "cpu_s_per_page": round(cpu / stats["pages"], 4) if stats["pages"] else None})
            results[name] = stats
            print(name, json.dumps(stats), file=sys.stderr)
    print(f"websim {args.hosts} hosts / {args.ips} IPs, budget {args.pages} pages, host delay {args.host_delay} s, "
          f"IP delay {args.ip_delay} s (2 shared cores: timings are noisy)")
    print(f"{'crawler':<10} {'pages':>6} {'span s':>7} {'pages/s':>8} {'wall s':>7} {'CPU s':>7} {'CPU s/page':>11}  violations")
    for name, r in results.items():
        print(f"{name:<10} {r['pages']:>6} {r.get('span_s', 0):>7} {r['pages_per_s']:>8} {r['wall_s']:>7} "
              f"{r['cpu_s']:>7} {r['cpu_s_per_page'] or 0:>11}  {r['violations']}")
    if "raycrawl" in results:
        ours = results["raycrawl"]
        for peer in ("scrapy", "bare"):
            if peer in results and results[peer]["pages_per_s"]:
                print(f"raycrawl / {peer}: pages/s ×{ours['pages_per_s'] / results[peer]['pages_per_s']:.2f}, "
                      f"CPU s/page ×{(ours['cpu_s_per_page'] or 0) / (results[peer]['cpu_s_per_page'] or 1):.2f}")


if __name__ == "__main__":
    main()
