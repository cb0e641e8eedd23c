"""``raycrawl ctl``: steer a running (or stopped) crawl — pause, resume, stop, add seeds, block,
throttle, budget, change scope — through its control plane in Redis (storage/operator_control.py).
Every agent applies a command within about 2 seconds; each is logged to ``OUT/operator.log``."""

from __future__ import annotations

import argparse
import getpass
import json
from pathlib import Path

from raycrawl.commands.status import add_password_option
from raycrawl.credentials import scrub
from raycrawl.errors import UserError
from raycrawl.settings import Settings

EPILOG = """verbs:
{verbs}

HOST is a server name (every scheme and port of it); SURT is a prefix such as 'org,example,' (the
host and its subdomains) or a URL ('http://example.org/private/'). Options come before OUT:
  raycrawl ctl --operator "ann <ann@lab.example>" /data/crawl block shop.example
docs/operating.md has the rest, and the console (raycrawl console) that runs the same commands."""


def register(subparsers) -> None:
    from raycrawl.storage.operator_verbs import VERBS, ctl_help

    p = subparsers.add_parser("ctl", help="steer a crawl: " + ", ".join(v.name for v in VERBS if v.run),
                              description="Steer a running (or stopped) crawl through its control plane in "
                              "Redis: every agent applies a command within about 2 seconds; each is logged to "
                              "OUT/operator.log.", epilog=EPILOG.format(verbs=ctl_help()),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--redis-url", help="Redis of the crawl (else the first word is its crawl directory)")
    add_password_option(p)
    p.add_argument("--prefix", default=Settings.redis_prefix, help=f"key prefix of the crawl (default {Settings.redis_prefix})")
    p.add_argument("--operator", default=None, help="who gives the command, for operator.log (default: $USER)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("words", nargs="+", metavar="[OUT] VERB ARG", help="crawl directory (without --redis-url), verb, arguments")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import redis

    from raycrawl.commands.status import crawl_redis, format_operator, given_password
    from raycrawl.storage.operator_control import Control
    from raycrawl.storage.operator_verbs import command, verb_named
    from raycrawl.storage.redis_frontier import RedisFrontier

    words = list(args.words)
    out = None if args.redis_url else Path(words.pop(0))
    if not words:
        raise UserError("ctl: give a verb (raycrawl ctl --help lists them)")
    verb, rest = verb_named(words[0]), words[1:]
    who = args.operator or _user()
    with crawl_redis(out, args.redis_url, given_password(args)) as (url, _running):
        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=5)
        except ValueError as exc:
            raise UserError(f"--redis-url {scrub(url)!r}: {exc}") from None
        try:
            if not RedisFrontier(client, args.prefix, register=False).has_crawl():
                raise UserError(f"no crawl under prefix {args.prefix!r} in that Redis")
            control = Control(client, args.prefix)
            if verb.run is None:  # show
                state = control.state()
                print(json.dumps(state, indent=2) if args.json else "\n".join(format_operator(state)))
                return 0
            done = command(control, verb.name, rest, who)
        except redis.ConnectionError as exc:
            raise UserError(f"cannot reach the crawl's Redis: {exc}") from None
        finally:
            client.close()
    print(json.dumps({"verb": verb.name, "done": done, "operator": who}) if args.json else f"{verb.name}: {done}")
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "-"
