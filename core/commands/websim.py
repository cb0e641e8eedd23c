"""``raycrawl websim serve|audit``: run the in-vitro web, audit a request log against its manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from raycrawl.argtypes import seconds
from raycrawl.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("websim", help="the in-vitro web: serve it, audit a crawl's request log",
                              description="The in-vitro web (see docs/websim.md).")
    sub = p.add_subparsers(dest="websim_command", metavar="ACTION")

    s = sub.add_parser("serve", help="serve a synthetic web on loopback until Ctrl-C")
    s.add_argument("--hosts", type=int, default=1000, help="number of hosts (default 1000)")
    s.add_argument("--ips", type=int, default=100, help="loopback addresses 127.0.1.1... to spread them over (default 100)")
    s.add_argument("--net", default="127.0", metavar="A.B",
                   help="serve on A.B.1.1... instead of 127.0.1.1...: a private /16 whose addresses are on this "
                        "machine's interfaces (tests/netns_cluster.py puts them in a network namespace)")
    s.add_argument("--seed", type=int, default=7, help="generation seed (default 7)")
    s.add_argument("--epoch", type=int, default=0, help="version of the web: K applies K rounds of changes (default 0)")
    s.add_argument("--pages-per-host-mean", type=float, default=25.0, help="mean pages per plain host (default 25)")
    s.add_argument("--port", type=int, default=0, help="TCP port on every IP (default: a free one)")
    s.add_argument("--dns-port", type=int, default=0, help="UDP port of the DNS server (default: a free one)")
    s.add_argument("--slow-delay", type=seconds, default=None, help="seconds slow hosts wait before answering (1.5)")
    s.add_argument("--loaded", type=int, default=0, metavar="N",
                   help="N hosts answer more slowly the more requests they got in the last 2 s (20 ms each): "
                        "servers a crawler slows down (websim.json names them)")
    s.add_argument("--members", type=int, default=0, metavar="N",
                   help="N hosts are members areas: their pages need a form login (POST /login; the user and "
                        "password are in websim.json), and a session serves 10 pages; one more host is "
                        "behind HTTP basic authentication (the same user and password)")
    s.add_argument("--clean", action="store_true",
                   help="a web for throughput: plain hosts, robots.txt allowing all, no traps, faults, "
                        "spam, crawl-delays or special resources")
    s.add_argument("--change-rates", action="store_true",
                   help="each page changes from epoch to epoch with a chance of its own (the manifest's "
                        "change_p), not all with the same: the web a periodic crawl (crawl --revisit) is for")
    s.add_argument("--requisites", action="store_true",
                   help="pages need what real pages need to be shown: each host's stylesheet (with an @import, "
                        "a background image), script and logo (with a 2x srcset), content images, and a "
                        "library and web font from a shared CDN host (the manifest's embeds)")
    s.add_argument("--scripts", action="store_true",
                   help="a JavaScript web: a third of the plain hosts' pages get their content and links from "
                        "scripts (inline, fetch() from a JSON endpoint, a lazy image, an infinite list, pushState, "
                        "a script that throws, alerts), and a page that never loads and one that exhausts the "
                        "browser's memory (the manifest's js: labels)")
    s.add_argument("--https", type=int, default=0, metavar="N",
                   help="serve the N most popular plain hosts on https too (a second port, a self-signed "
                        "certificate), with about half the links to them under https (default 0)")
    s.add_argument("--real-pages", type=Path, default=None, metavar="DIR",
                   help="serve the real pages in DIR (NAME.html.gz, with languages.tsv) unchanged beside the web, as "
                        "/pages/NAME.html on real-pages.test, linked from the first seed (the manifest's kind real)")
    s.add_argument("--prerender", action="store_true",
                   help="render every page before serving (slower start, no rendering during a crawl)")
    s.add_argument("--out", type=Path, required=True, help="directory for manifest, request log, hosts and seeds files")
    s.add_argument("--ready-file", type=Path, default=None, help=argparse.SUPPRESS)
    s.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    s.set_defaults(func=_serve)

    a = sub.add_parser("audit", help="check a request log for politeness, robots and duplicate-fetch violations")
    a.add_argument("log", type=Path, help="requests.log written by websim")
    a.add_argument("--manifest", type=Path, default=None,
                   help="manifest.jsonl.gz (default: the one next to the log)")
    a.add_argument("--host-delay", type=float, required=True, help="required seconds between requests to a host")
    a.add_argument("--ip-delay", type=float, required=True, help="required seconds between requests to an IP")
    a.add_argument("--tolerance", type=float, default=0.002, help="clock tolerance in seconds (default 0.002)")
    a.add_argument("--show", type=int, default=10, help="violations to list (default 10)")
    a.add_argument("--json", action="store_true", help="print the report as JSON instead")
    a.set_defaults(func=_audit)

    st = sub.add_parser("stats", help="summarise a manifest: roles, robots kinds, page kinds, reachability")
    st.add_argument("manifest", type=Path, help="manifest.jsonl.gz or the websim output directory")
    st.set_defaults(func=_stats)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from raycrawl.websim.model import WebModel
    from raycrawl.websim.server import SLOW_DELAY, serve_forever

    if args.hosts < 1 or args.ips < 1 or args.epoch < 0 or args.pages_per_host_mean < 1:
        raise UserError("--hosts, --ips and --pages-per-host-mean must be >= 1, --epoch >= 0")
    if args.ips > 254 * 254:
        raise UserError("--ips: at most 64516 loopback addresses")
    if args.https < 0:
        raise UserError("--https must be >= 0")
    if not 0 <= args.port < 65536 or not 0 <= args.dns_port < 65536:
        raise UserError("--port/--dns-port must be in 0..65535")
    if args.real_pages is not None and not any(Path(args.real_pages).glob("*.html.gz")):
        raise UserError(f"--real-pages: no NAME.html.gz pages in {args.real_pages}")
    try:
        model = WebModel.generate(args.hosts, args.ips, args.seed, args.epoch, args.pages_per_host_mean, args.clean,
                                  args.change_rates, args.requisites, args.net, args.scripts, args.real_pages)
    except ValueError as exc:  # (the other arguments were checked above)
        raise UserError(f"--net: {exc}") from None

    def announce(info: dict) -> None:
        if args.quiet:
            return
        print(f"websim: {args.hosts} hosts on {len(info['ips'])} IPs ({info['ips'][0]}..{info['ips'][-1]}), "
              f"port {info['port']}" + (f", https on port {info['tls_port']} for {len(info['https_hosts'])} hosts"
                                        if info["tls_port"] else ""), flush=True)
        print(f"  DNS server   {info['dns'][0]}:{info['dns'][1]} (UDP)")
        print(f"  seeds        {info['seeds']}")
        print(f"  hosts file   {info['hosts_file']}")
        print(f"  manifest     {info['manifest']}")
        print(f"  request log  {info['request_log']}")
        print("Ctrl-C to stop.", flush=True)

    try:
        asyncio.run(serve_forever(model, args.out, args.port, args.dns_port, args.ready_file, announce,
                                  args.slow_delay if args.slow_delay is not None else SLOW_DELAY, args.prerender,
                                  args.https, args.loaded, args.members))
    except OSError as exc:
        raise UserError(f"cannot serve: {exc}") from exc
    return 0


def _audit(args: argparse.Namespace) -> int:
    from raycrawl.websim.audit import audit
    from raycrawl.websim.manifest import load_manifest
    from raycrawl.websim.request_log import read_request_log

    manifest_path = args.manifest or args.log.parent / "manifest.jsonl.gz"
    if not args.log.is_file():
        raise UserError(f"{args.log}: no such request log")
    if not manifest_path.is_file():
        raise UserError(f"{manifest_path}: no such manifest (give --manifest)")
    if args.host_delay < 0 or args.ip_delay < 0 or args.tolerance < 0:
        raise UserError("delays and tolerance must be >= 0")
    try:
        manifest = load_manifest(manifest_path)
        records = read_request_log(args.log)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(str(exc)) from exc
    report = audit(records, manifest, args.host_delay, args.ip_delay, args.tolerance)
    if args.json:
        import json

        print(json.dumps(report.to_json(), indent=1))
    else:
        print(report.summary(args.show))
    return 0 if report.ok else 1


def _stats(args: argparse.Namespace) -> int:
    from raycrawl.websim.manifest import load_manifest, manifest_stats

    if not args.manifest.exists():
        raise UserError(f"{args.manifest}: no such manifest")
    try:
        manifest = load_manifest(args.manifest)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    print(manifest_stats(manifest))
    return 0


def demo_stage(crawl_dir: Path, host_delay: float = 0.2, ip_delay: float = 0.05) -> str:
    """The demo's websim stage. If ``crawl_dir/websim/`` or ``crawl_dir/../websim/`` holds a request
    log and manifest (a crawl ran against websim there), audit it; otherwise serve a small web in ``crawl_dir/websim/``,
    make a short polite scripted visit and audit that. Returns the text to print."""
    import asyncio

    from raycrawl.websim import Websim, audit, load_manifest, read_request_log
    from raycrawl.websim.visit import scripted_visit

    crawl_dir = Path(crawl_dir)
    wdir = crawl_dir / "websim"
    for candidate in (wdir, crawl_dir.parent / "websim"):  # the demo keeps websim beside the crawl
        if (candidate / "requests.log").is_file() and (candidate / "manifest.jsonl.gz").is_file():
            wdir = candidate
            break
    log_path, manifest_path = wdir / "requests.log", wdir / "manifest.jsonl.gz"
    if log_path.is_file() and manifest_path.is_file():
        manifest = load_manifest(manifest_path)
        report = audit(read_request_log(log_path), manifest, host_delay, ip_delay)
        head = f"websim audit of the crawl's request log ({log_path}), host delay {host_delay} s, IP delay {ip_delay} s"
        return head + "\n" + report.summary()
    with Websim(hosts=40, ips=4, seed=7, out_dir=wdir) as web:
        m = web.manifest
        visit = asyncio.run(scripted_visit(m, web.hosts_file, max_pages=30, host_delay=host_delay, ip_delay=ip_delay,
                                           per_host=4))
        report = web.audit(host_delay, ip_delay)
        roles: dict[str, int] = {}
        for rec in m.hosts.values():
            roles[rec["role"]] = roles.get(rec["role"], 0) + 1
        lines = [
            f"websim: {len(m.hosts)} hosts on {len(web.ips)} IPs, port {web.port}, DNS {web.dns_address[0]}:{web.dns_address[1]}",
            f"  {len(m.pages)} URLs in the manifest, {len(m.clusters)} duplicate clusters, "
            f"roles: " + ", ".join(f"{k} {v}" for k, v in sorted(roles.items())),
            f"  scripted polite visit: {len(visit.fetched)} requests in {visit.seconds:.1f} s "
            f"(host delay {host_delay} s, IP delay {ip_delay} s)",
            report.summary(),
        ]
    return "\n".join(lines)
