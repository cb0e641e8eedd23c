"""websim alone: how many pages per second it serves to a plain aiohttp client.

Peer: a bare aiohttp server returning one pre-built body of the same mean size from a single
handler (no virtual hosting, no lookup, no request log), measured in the same run, same client.
The ratio is websim's cost over the floor of aiohttp itself. Both servers run in their own
process; CPU seconds are read from /proc for the server and from getrusage for the client.

    .venv/bin/python benchmarks/websim_serve.py [--hosts 300] [--requests 20000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raycrawl.websim import Websim  # noqa: E402
from raycrawl.websim.client import HostsResolver  # noqa: E402

PEER = r"""
import sys
from aiohttp import web
body = b"x" * int(sys.argv[2])
async def handle(request):
    return web.Response(body=body, content_type="text/html")
app = web.Application()
app.router.add_route("GET", "/{tail:.*}", handle)
web.run_app(app, host="127.0.0.2", port=int(sys.argv[1]), access_log=None, print=None)
"""


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def hammer(urls: list[str], n: int, concurrency: int, resolver) -> tuple[float, int, int]:
    connector = aiohttp.TCPConnector(resolver=resolver, limit=concurrency, force_close=False)
    done = nbytes = errors = 0
    async with aiohttp.ClientSession(connector=connector) as s:
        async def worker(k: int) -> None:
            nonlocal done, nbytes, errors
            i = k
            while i < n:
                try:
                    async with s.get(urls[i % len(urls)], allow_redirects=False) as r:
                        nbytes += len(await r.read())
                        done += 1
                except aiohttp.ClientError:
                    errors += 1
                i += concurrency

        t = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        return time.perf_counter() - t, nbytes, errors


def measure(label: str, pid: int, urls: list[str], n: int, concurrency: int, resolver) -> dict:
    # First pass over the distinct pages: websim renders each page here (then serves it from cache).
    w0 = proc_cpu(pid)
    cold_secs, _, _ = asyncio.run(hammer(urls, len(urls), concurrency, resolver))
    cold_cpu = proc_cpu(pid) - w0
    s0, c0 = proc_cpu(pid), client_cpu()
    secs, nbytes, errors = asyncio.run(hammer(urls, n, concurrency, resolver))
    s1, c1 = proc_cpu(pid), client_cpu()
    return {"label": label, "first-fetch pages/s": len(urls) / cold_secs,
            "first-fetch server cpu/page us": cold_cpu / len(urls) * 1e6, "pages/s": n / secs, "MB/s": nbytes / secs / 1e6, "seconds": secs, "errors": errors,
            "server cpu/page us": (s1 - s0) / n * 1e6, "client cpu/page us": (c1 - c0) / n * 1e6,
            "pages per server cpu s": n / max(1e-9, s1 - s0), "server cpu %": 100 * (s1 - s0) / secs, "client cpu %": 100 * (c1 - c0) / secs, "bytes/page": nbytes / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--ips", type=int, default=30)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--pages", type=int, default=5000, help="distinct pages cycled through")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        with Websim(hosts=args.hosts, ips=args.ips, seed=7, out_dir=tmp) as web:
            start_s = time.perf_counter() - t
            m = web.manifest
            urls = [p["url"] for p in m.pages.values() if p["kind"] == "html" and p["status"] == 200
                    and m.hosts[p["host"]]["fault"] is None][: args.pages]
            ws = measure("websim", web.pid, urls, args.requests, args.concurrency, HostsResolver(web.hosts_file))
            logged = len(web.requests())
        body = int(ws["bytes/page"])
        port = 18000 + os.getpid() % 20000
        peer = subprocess.Popen([sys.executable, "-c", PEER, str(port), str(body)])
        try:
            for _ in range(200):
                try:
                    import socket

                    socket.create_connection(("127.0.0.2", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            peer_urls = [f"http://127.0.0.2:{port}/p{i}.html" for i in range(len(urls))]
            pr = measure("bare aiohttp", peer.pid, peer_urls, args.requests, args.concurrency, None)
        finally:
            peer.terminate()
            peer.wait()
    print(f"websim: {args.hosts} hosts, {len(m.pages)} URLs, started in {start_s:.1f} s; "
          f"{args.requests} requests over {len(urls)} distinct pages, concurrency {args.concurrency}; "
          f"request log lines {logged}")
    keys = ["first-fetch pages/s", "first-fetch server cpu/page us", "pages/s", "pages per server cpu s", "MB/s", "bytes/page", "server cpu/page us", "client cpu/page us", "server cpu %", "client cpu %",
            "errors"]
    print(f"{'':32}{'websim':>14}{'bare aiohttp':>14}{'ratio':>8}")
    for k in keys:
        ratio = ws[k] / pr[k] if pr[k] else float("nan")
        print(f"{k:32}{ws[k]:14.1f}{pr[k]:14.1f}{ratio:8.2f}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          "(pages/s is capped by CPU share when the machine is busy; pages per server CPU second is not)")


if __name__ == "__main__":
    main()
