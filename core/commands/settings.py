"""``raycrawl settings``: the effective crawl settings and where each value came from, or a
commented sample config."""

from __future__ import annotations

import argparse
import json

from raycrawl.commands.crawl import add_setting_flags, add_settings_options, resolve_settings


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "settings", help="print the effective crawl settings and the source of each (default, config, -s, flag)",
        description="Resolve settings exactly as `raycrawl crawl` would with the same --config, -s and flags, and "
        "print each with its value and where it came from, then the chain of crawl-time stages in force. --sample prints a commented config file with every "
        "setting at its default (docs/sample-config.toml).")
    p.add_argument("--sample", action="store_true", help="print a commented sample config (TOML) instead")
    p.add_argument("--json", action="store_true", help="print JSON: {setting: {value, source}}")
    add_settings_options(p)
    add_setting_flags(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from raycrawl.settings import sample_config, settings_sources

    if args.sample:
        print(sample_config(), end="")
        return 0
    from raycrawl.actors.visit.chain import chain

    s = resolve_settings(args)
    sources = settings_sources(s)
    values = s.to_dict()
    links = chain(s)
    if args.json:
        out = {k: {"value": v, "source": sources[k]} for k, v in values.items()}
        out["chain"] = [{"stage": k.name, "position": k.position, "class": k.path} for k in links]
        print(json.dumps(out, indent=2))
        return 0
    width = max(map(len, values))
    for name, value in values.items():
        shown = json.dumps(value) if not isinstance(value, str) else value
        print(f"{name:<{width}}  {shown:<40}  {sources[name]}")
    print("\nthe chain of crawl-time stages in force (the stages setting changes it; a stage its own setting "
          "leaves off is skipped):")
    for k in links:
        print(f"  {k.position:>6}  {k.name:<14}  {k.path}")
    return 0
