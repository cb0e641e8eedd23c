"""``raycrawl crawl``: run (or resume) a crawl into an output directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from raycrawl.argtypes import comma_list, non_negative_float, non_negative_int
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout

# Settings the command line (a flag, -s or the config file) must give; the others default as in
# docs/settings.md.
REQUIRED = ("out",)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "crawl",
        help="crawl from seed URLs (BUbiNG-style agent on Ray, frontier in Redis)",
        description="Crawl from the seeds into OUT: OUT/warc/*.warc.gz, OUT/links/*.rec.gz, OUT/report.json. "
        "Exits 0 when the frontier is empty or the page budget is spent. Every setting of "
        "docs/settings.md is a flag; see docs/crawling.md.",
    )
    add_settings_options(p)
    p.add_argument("--json", action="store_true", help="print the final report as JSON")
    add_setting_flags(p)
    p.set_defaults(func=handle)


def add_settings_options(parser: argparse.ArgumentParser) -> None:
    """--config and -s, the two ways besides the flags to give settings (flags win, then -s, then the file)."""
    parser.add_argument("--config", type=Path, help="settings file (.toml/.yaml; docs/sample-config.toml); "
                        "-s and flags override it")
    parser.add_argument("-s", "--set", action="append", default=[], dest="assignments", metavar="KEY=VALUE",
                        help="set any setting of docs/settings.md (repeatable; flags override it), e.g. "
                        "-s host_delay=1.5 -s near_dup=off")


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per field of :class:`raycrawl.settings.Settings`, grouped as the docs table is, with
    the field's help and default (a flag not given leaves the config file's or default value)."""
    from raycrawl.settings import setting_fields, show_default

    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in setting_fields():
        group = f.metadata["group"]
        if group not in groups:
            groups[group] = parser.add_argument_group(f"{group} settings")
        kind = str(f.type).replace(" | None", "")
        text = f.metadata["help"].replace("``", "").replace("%", "%%")
        kwargs: dict = {"dest": f.name, "default": None,
                        "help": f"{text} (required)" if f.name in REQUIRED else f"{text} (default: {show_default(f)})"}
        if kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"], kwargs["metavar"] = {"int": (non_negative_int, "N"), "float": (non_negative_float, "X"),
                                                 "list[str]": (comma_list, "A,B")}.get(kind, (str, f.name.upper()))
        groups[group].add_argument("--" + f.name.replace("_", "-"), **kwargs)


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


def resolve_settings(args: argparse.Namespace):
    """The settings the parsed --config, -s and flags give (``raycrawl settings`` shows the same)."""
    from raycrawl.settings import build_settings, setting_fields

    return build_settings(args.config, args.assignments, **{f.name: getattr(args, f.name) for f in setting_fields()})


def settings_from_args(args: argparse.Namespace):
    from raycrawl.settings import settings_sources

    s = resolve_settings(args)
    missing = [name for name in REQUIRED if settings_sources(s)[name] == "default"]
    if missing:
        raise UserError(f"--{missing[0]} is required (a flag, -s {missing[0]}=… or the config file)")
    if not s.resume and not s.seeds:
        raise UserError("--seeds FILE is required (unless --resume)")
    # Fail fast, before anything starts or is written: the seeds, the hosts file, the cluster.
    if s.seeds:
        from raycrawl.seeds import read_seeds

        read_seeds(s.seeds)
    if s.resolve:
        from raycrawl.actors.fetch.dns import parse_hosts_file

        parse_hosts_file(s.resolve)
    if s.focus:
        from raycrawl.policies.focus import FocusPolicy

        FocusPolicy.load(s.focus)  # a missing or foreign model is a one-line error now, not in an actor
    if s.address and s.address != "auto":
        _check_ray_address(s.address)
    # (with agent_dir the sieve is in the agents' directories and the store; OUT has the crawl id)
    if s.resume and not (layout(Path(s.out)).sieve.is_dir() or (s.agent_dir and layout(Path(s.out)).crawl_id.is_file())):
        raise UserError(f"--resume: no crawl to resume in {s.out}")
    if Path(s.out).exists() and not Path(s.out).is_dir():
        raise UserError(f"--out {s.out} is not a directory")
    return s


def handle(args: argparse.Namespace) -> int:
    import json

    from raycrawl import heap_watch, malloc_trim
    from raycrawl.actors.cluster.driver import run_crawl
    from raycrawl.progress import Progress
    from raycrawl.report import format_report

    settings = settings_from_args(args)
    heap_watch.start("driver")
    malloc_trim.start()
    progress = Progress(settings.progress_interval)
    try:
        report = run_crawl(settings, progress)
    finally:
        progress.close()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    if settings.focus:
        from raycrawl.policies.focus import FocusPolicy
        from raycrawl.tasks.focus_harvest import write_live_harvest

        h = write_live_harvest(Path(settings.out), FocusPolicy.load(settings.focus))
        print(f"focus: {h['fetched']} pages fetched, {h['relevant_judged']} judged relevant "
              f"(harvest {h['harvest_judged']:.3f}); pages per level {h['fetched_per_level']} "
              f"-> {settings.out}/focus/harvest.{{tsv,json,png}}", file=sys.stderr if args.json else sys.stdout)
    if report.get("stopped") in ("interrupted", "stopped"):
        why = "stopped by the operator" if report["stopped"] == "stopped" else "interrupted"
        print(f"raycrawl crawl: {why}; everything fetched is stored and committed: continue with "
              f"--resume --out {settings.out}", file=sys.stderr)
        return 128 + report.get("stop_signal", 2) if report["stopped"] == "interrupted" else 0
    return 0


def demo_stage(crawl_dir: Path) -> str:
    """The crawl report of a finished crawl in ``crawl_dir``, as printed by ``raycrawl crawl``.
    (The demo runs the crawl itself with :func:`actors.cluster.driver.run_crawl`; see docs/crawling.md.)"""
    import json

    from raycrawl.report import format_report

    path = layout(Path(crawl_dir)).report
    if not path.is_file():
        raise UserError(f"no crawl report in {crawl_dir}")
    return format_report(json.loads(path.read_text()))
