"""``raycrawl crawl``: run (or resume) a crawl into an output directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raycrawl.argtypes import non_negative_int, seconds
from raycrawl.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "crawl",
        help="crawl from seed URLs (BUbiNG-style agent on Ray, frontier in Redis)",
        description="Crawl from the seeds into OUT: OUT/warc/*.warc.gz, OUT/links/*.rec.gz, OUT/report.json. "
        "Exits 0 when the frontier is empty or the page budget is spent. See docs/crawling.md.",
    )
    p.add_argument("--seeds", type=Path, help="file of seed URLs, one per line (required unless --resume)")
    p.add_argument("--out", type=Path, required=True, help="crawl directory")
    p.add_argument("--max-pages", type=non_negative_int, help="stop after this many pages (default: no limit)")
    p.add_argument("--host-delay", type=seconds, help="seconds between requests to one host (default 2)")
    p.add_argument("--ip-delay", type=seconds, help="seconds between requests to one IP (default 0.5)")
    p.add_argument("--max-urls-per-host", type=non_negative_int, help="URLs scheduled per host (default 10000)")
    p.add_argument("--user-agent", help="User-Agent header and robots.txt token")
    dns = p.add_mutually_exclusive_group()
    dns.add_argument("--resolve", help="hosts file: resolve names from this file only")
    dns.add_argument("--dns-server", help="IP:PORT of the DNS server to query")
    p.add_argument("--allow-networks", help="comma-separated CIDRs that may be connected to "
                   "(default: public unicast only)")
    p.add_argument("--redis-url", help="Redis for the frontier (default: embedded, data in OUT/redis)")
    p.add_argument("--config", type=Path, help="settings file (.toml/.yaml); options override it")
    p.add_argument("--resume", action="store_true", help="continue the crawl in OUT (after a stop or a crash)")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    p.add_argument("--agents", type=non_negative_int, help="agents, spread over the cluster's nodes (default 1)")
    p.add_argument("--elastic", action="store_true",
                   help="one agent per Ray node (per node with the 'agent' resource, if any), following "
                        "nodes as they join and leave")
    p.add_argument("--json", action="store_true", help="print the final report as JSON")
    p.set_defaults(func=handle)


def _check_ray_address(address: str) -> None:
    """A Ray cluster answers at ``address`` (HOST:PORT of its GCS), or a UserError at once (ray.init
    would retry for minutes)."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--address must be HOST:PORT of a Ray cluster's head (or 'auto'), got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise UserError(f"no Ray cluster answers at --address {address}: {exc.strerror or exc}") from None


def settings_from_args(args: argparse.Namespace):
    from raycrawl.settings import build_settings

    s = build_settings(
        args.config,
        seeds=str(args.seeds) if args.seeds else None, out=str(args.out), max_pages=args.max_pages,
        host_delay=args.host_delay, ip_delay=args.ip_delay, max_urls_per_host=args.max_urls_per_host,
        user_agent=args.user_agent, resolve=args.resolve, dns_server=args.dns_server,
        allow_networks=args.allow_networks, redis_url=args.redis_url, address=args.address, agents=args.agents,
        elastic=True if args.elastic else None,
        resume=True if args.resume else None,
    )
    if not s.resume and not s.seeds:
        raise UserError("--seeds FILE is required (unless --resume)")
    # Fail fast, before anything starts or is written: the seeds, the hosts file, the cluster.
    if s.seeds:
        from raycrawl.seeds import read_seeds

        read_seeds(s.seeds)
    if s.resolve:
        from raycrawl.actors.dns import parse_hosts_file

        parse_hosts_file(s.resolve)
    if s.address and s.address != "auto":
        _check_ray_address(s.address)
    if s.resume and not (Path(s.out) / "sieve").is_dir():
        raise UserError(f"--resume: no crawl to resume in {s.out}")
    if Path(s.out).exists() and not Path(s.out).is_dir():
        raise UserError(f"--out {s.out} is not a directory")
    return s


def handle(args: argparse.Namespace) -> int:
    import json

    from raycrawl.actors.driver import run_crawl
    from raycrawl.progress import Progress
    from raycrawl.report import format_report

    settings = settings_from_args(args)
    progress = Progress(settings.progress_interval)
    try:
        report = run_crawl(settings, progress)
    finally:
        progress.close()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    if report.get("stopped") == "interrupted":
        print(f"raycrawl crawl: interrupted; everything fetched is stored and committed: continue with "
              f"--resume --out {settings.out}", file=sys.stderr)
        return 130
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """The crawl report of a finished crawl in ``crawl_dir``, as printed by ``raycrawl crawl``.
    (The demo runs the crawl itself with :func:`actors.driver.run_crawl`; see docs/crawling.md.)"""
    import json

    from raycrawl.report import format_report

    path = Path(crawl_dir) / "report.json"
    if not path.is_file():
        raise UserError(f"no crawl report in {crawl_dir}")
    return format_report(json.loads(path.read_text()))
