"""Issue 3's acceptance run: a full polite crawl of a 1,000-host / 100-IP websim, audited.

    .venv/bin/python benchmarks/full_crawl_audit.py [--hosts 1000 --ips 100 --seed 1]

Prints the crawl report and websim's audit (host/IP politeness from the end of each response,
robots, URLs fetched twice); exits 1 if the audit finds any violation.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from raycrawl.actors.cluster.driver import run_crawl  # noqa: E402
from raycrawl.report import format_report  # noqa: E402
from raycrawl.settings import build_settings  # noqa: E402
from raycrawl.websim import Websim  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.02)
    ap.add_argument("--max-urls-per-host", type=int, default=1000)
    ap.add_argument("--out", default=None, help="working directory (default: a temporary one)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="full-crawl-"))
    with Websim(hosts=args.hosts, ips=args.ips, seed=args.seed, out_dir=out / "websim") as web:
        ip, port = web.dns_address
        settings = build_settings(seeds=str(web.seeds_file), out=str(out / "crawl"), dns_server=f"{ip}:{port}",
                                  allow_networks="127.0.0.0/8", host_delay=args.host_delay,
                                  ip_delay=args.ip_delay, max_urls_per_host=args.max_urls_per_host,
                                  read_timeout=3.0)
        t0 = time.time()
        report = run_crawl(settings)
        print(f"websim {args.hosts} hosts / {args.ips} IPs (seed {args.seed}); crawl wall time {time.time() - t0:.0f} s")
        print(format_report(report))
        web.flush_log()
        audit = web.audit(host_delay=args.host_delay, ip_delay=args.ip_delay)
        reachable = len(web.manifest.reachable(obey_robots=True))
    print(audit.summary())
    print(f"robots-allowed reachable pages in the manifest: {reachable}")
    return 0 if audit.ok else 1


if __name__ == "__main__":
    sys.exit(main())
