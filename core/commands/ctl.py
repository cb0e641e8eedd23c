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

VERBS = """verbs:
  pause | resume | stop              no new fetches / fetch again / stop as Ctrl-C does (--resume continues)
  seeds add URL|FILE...              queue seeds (through the crawl's scope and filters, like any link)
  block HOST|SURT...                 nothing fetched there from now on; queued URLs dropped as 'blocked'
  unblock HOST|SURT...
  throttle HOST|SURT SECONDS|off     the host delay there (higher or lower; never below Crawl-delay)
  budget HOST|SURT PAGES|off         at most that many more pages there
  scope deny|allow|remove REGEX|surt:PREFIX
  show                               the switches and overrides in force

HOST is a server name (every scheme and port of it); SURT is a prefix such as 'org,example,' (the
host and its subdomains) or a URL ('http://example.org/private/'). Options come before OUT:
  raycrawl ctl --operator "ann <ann@lab.example>" /data/crawl block shop.example
docs/operating.md has the rest, and the console (raycrawl console) that runs the same commands."""


def register(subparsers) -> None:
    p = subparsers.add_parser("ctl", help="steer a crawl: pause, resume, stop, seeds, block, throttle, budget, scope",
                              description="Steer a running (or stopped) crawl through its control plane in "
                              "Redis: every agent applies a command within about 2 seconds; each is logged to "
                              "OUT/operator.log.", epilog=VERBS,
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

    from raycrawl.commands.status import crawl_redis, format_operator, given_password, operator_state
    from raycrawl.storage.operator_control import Control
    from raycrawl.storage.redis_frontier import RedisFrontier

    words = list(args.words)
    out = None if args.redis_url else Path(words.pop(0))
    if not words:
        raise UserError("ctl: give a verb (raycrawl ctl --help lists them)")
    verb, rest = words[0], words[1:]
    who = args.operator or _user()
    with crawl_redis(out, args.redis_url, given_password(args)) as (url, _running):
        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=5)
        except ValueError as exc:
            raise UserError(f"--redis-url {scrub(url)!r}: {exc}") from None
        try:
            if not RedisFrontier(client, args.prefix, register=False).has_crawl():
                raise UserError(f"no crawl under prefix {args.prefix!r} in that Redis")
            if verb == "show":
                state = operator_state(client, args.prefix)
                print(json.dumps(state, indent=2) if args.json else "\n".join(format_operator(state)))
                return 0
            done = Control(client, args.prefix).command(verb, rest, who)
        except redis.ConnectionError as exc:
            raise UserError(f"cannot reach the crawl's Redis: {exc}") from None
        finally:
            client.close()
    print(json.dumps({"verb": verb, "done": done, "operator": who}) if args.json else f"{verb}: {done}")
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "-"
