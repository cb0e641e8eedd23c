"""``raycrawl demo``: the whole pipeline on embedded defaults, against websim on loopback.

Starts websim (its own DNS server and request log), an embedded Redis and a local Ray, crawls
the simulated web politely, audits the crawl from websim's request log, then runs every
analysis stage (each stage module's ``demo_stage(crawl_dir) -> str``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import time
from pathlib import Path

from raycrawl.errors import UserError

log = logging.getLogger(__name__)

# Analysis stages in pipeline order: name -> module holding ``demo_stage(crawl_dir) -> str``.
STAGE_MODULES = {
    "warc": "raycrawl.storage.warc",
    "wacz": "raycrawl.commands.warc",
    "dedup": "raycrawl.commands.dedup",
    "graph": "raycrawl.commands.graph",
    "summaries": "raycrawl.commands.summaries",
    "rank": "raycrawl.commands.rank",
    "simulate": "raycrawl.commands.simulate",
    "spam": "raycrawl.commands.spam",
    "index": "raycrawl.commands.index",
}
STAGES = tuple(STAGE_MODULES)
MARKER = ".raycrawl-demo"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="crawl the simulated web with embedded Redis and local Ray, then run every analysis stage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="demo-out", help="output directory, replaced if it holds an earlier demo")
    p.add_argument("--hosts", type=int, default=200, help="websim hosts (default 200)")
    p.add_argument("--ips", type=int, default=20, help="loopback addresses the hosts share (default 20)")
    p.add_argument("--seed", type=int, default=7, help="websim seed (default 7)")
    p.add_argument("--max-pages", type=int, default=0, help="page budget, 0 = crawl everything reachable")
    p.add_argument("--host-delay", type=float, default=0.05, help="seconds between requests to one host")
    p.add_argument("--ip-delay", type=float, default=0.01, help="seconds between requests to one IP")
    p.add_argument(
        "--max-urls-per-host", type=int, default=300, help="per-host URL budget; bounds traps (default 300)"
    )
    p.add_argument("--skip", default="", help="comma-separated analysis stages to skip: " + ",".join(STAGES))
    p.set_defaults(func=handle)


def _prepare(out: Path) -> None:
    if out.exists():
        if not (out / MARKER).exists():
            raise UserError(f"{out} exists and is not an earlier demo output: choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by raycrawl demo; replaced by the next demo run\n")


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)), flush=True)


def handle(args: argparse.Namespace) -> int:
    from raycrawl.actors.cluster.driver import run_crawl
    from raycrawl.progress import Progress
    from raycrawl.settings import build_settings
    from raycrawl.websim import Websim

    for name in ("hosts", "ips"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} must be at least 1")
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(STAGES):
        raise UserError(f"--skip: unknown stage(s) {sorted(skip - set(STAGES))}; known: {', '.join(STAGES)}")
    out = Path(args.out)
    _prepare(out)
    crawl_dir = out / "crawl"
    failures = []
    _section(f"websim: {args.hosts} hosts on {args.ips} loopback IPs (seed {args.seed})")
    with Websim(hosts=args.hosts, ips=args.ips, seed=args.seed, out_dir=out / "websim") as web:
        dns_ip, dns_port = web.dns_address
        print(f"serving on port {web.port}; DNS at {dns_ip}:{dns_port}; {len(web.seeds())} seed URLs")
        settings = build_settings(
            seeds=str(web.seeds_file),
            out=str(crawl_dir),
            dns_server=f"{dns_ip}:{dns_port}",
            allow_networks="127.0.0.0/8",
            host_delay=args.host_delay,
            ip_delay=args.ip_delay,
            max_pages=args.max_pages,
            max_urls_per_host=args.max_urls_per_host,
            # websim has hosts that never answer: don't let them hold the demo's tail for 15 s each.
            read_timeout=3.0,
        )
        _section("crawl")
        t0 = time.time()
        report = run_crawl(settings, Progress())
        print(_crawl_summary(report, time.time() - t0))
        web.flush_log()
        audit = web.audit(host_delay=args.host_delay, ip_delay=args.ip_delay)
        _section("politeness and robots audit (from websim's request log)")
        print(audit.summary())
        if not audit.ok:
            failures.append("audit")
    for name in STAGES:
        if name in skip:
            continue
        stage = importlib.import_module(STAGE_MODULES[name]).demo_stage  # every stage has one
        _section(name)
        t0 = time.time()
        try:
            print(stage(crawl_dir))
        except Exception as exc:  # noqa: BLE001 - one failing stage must not hide the others' output
            log.exception("demo stage %s failed", name)
            print(f"stage {name} FAILED: {exc}")
            failures.append(name)
        print(f"({time.time() - t0:.1f} s)")
    _section("done")
    print(f"outputs in {out}/ (crawl in {crawl_dir}/, websim log and manifest in {out}/websim/)")
    if failures:
        print(f"FAILED: {', '.join(failures)}")
        return 1
    return 0


def _crawl_summary(report: dict, seconds: float) -> str:
    keys = ("pages", "pages_per_s", "bytes", "by_status", "by_type", "duplicates", "errors", "stopped")
    lines = [f"{k}: {report[k]}" for k in keys if k in report]
    lines.append(f"wall time: {seconds:.1f} s; full report: report.json")
    return "\n".join(lines)
