"""``raycrawl check OUT``: the consistency check ``--resume`` runs (storage/crawl_check.py), on demand."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raycrawl.commands.status import add_password_option, given_password
from raycrawl.credentials import scrub
from raycrawl.errors import UserError
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import layout


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check", help="check that a stopped crawl's files and Redis agree (what --resume checks)",
        description="Check a stopped crawl directory: the embedded Redis's AOF, the sieve shards, the link "
        "records and WARC files, and Redis's commits against the archive. Prints each damaged file with the "
        "choices; exit 0 when consistent, 1 when damaged. --repair carries out the repairs that the crawl's "
        "own files make exact (a sieve shard's commit point and fingerprints rebuilt from its queue; pending-log "
        "lines the sieve cannot have written dropped; for a Redis that lost commits, consent to fetch those URLs "
        "again), then checks again.")
    p.add_argument("out", type=Path, help="crawl directory")
    p.add_argument("--redis-url", help="the crawl's Redis, when it did not use the embedded one")
    add_password_option(p)
    p.add_argument("--prefix", default=Settings.redis_prefix,
                   help=f"key prefix of the crawl (default {Settings.redis_prefix})")
    p.add_argument("--repair", action="store_true", help="carry out the repairs offered, then check again")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handle)


def _check(out: Path, redis_url: str | None, prefix: str, consent: bool = False,
           password: str | None = None) -> tuple[list, dict]:
    """The damages found, and facts; ``consent``: accept the refetches a Redis behind the archive
    implies (recorded in Redis, then checked again)."""
    from raycrawl.redis_server import redis_url_for
    from raycrawl.storage.crawl_check import check_against_redis, check_files
    from raycrawl.storage.redis_frontier import RedisFrontier

    damages = check_files(out, embedded_redis=redis_url is None)
    if any(d.path.is_relative_to(layout(out).redis) for d in damages):
        return damages, {}  # the AOF cannot be opened safely
    import redis

    with redis_url_for(redis_url, layout(out).redis, password=password if redis_url else None) as url:
        client = redis.Redis.from_url(url)
        try:
            f = RedisFrontier(client, prefix, register=False)
            if not f.has_crawl():
                raise UserError(f"{scrub(url)} holds no crawl under prefix {prefix!r}")
            found, unconfirmed = check_against_redis(out, f)
            if consent and any(d.kind == "behind" for d in found):
                # The consent makes every fetched-but-uncommitted URL allowed: only that damage goes.
                f.consent_refetch(unconfirmed)
                found = [d for d in found if d.kind != "behind"]
            facts = {"pages": f.stats().get("pages", 0), "in_flight": f.counts()["inflight"],
                     "fetched_not_committed": unconfirmed}
        finally:
            client.close()
    return damages + found, facts


def handle(args: argparse.Namespace) -> int:
    from raycrawl.storage.crawl_check import repair
    from raycrawl.storage.crawl_dir import CrawlDirLock, layout, read_crawl_id

    out: Path = args.out
    if read_crawl_id(out) is None and not (layout(out).redis).is_dir():
        raise UserError(f"{out} holds no crawl")
    with CrawlDirLock(out):  # never check (or repair) under a running crawl
        password = given_password(args)
        damages, facts = _check(out, args.redis_url, args.prefix, password=password)
        done: list[str] = []
        if args.repair and any(d.repair for d in damages):
            done = repair(damages)
            done += [f"{d.path}: {d.repair}" for d in damages if d.kind == "behind"]
            damages, facts = _check(out, args.redis_url, args.prefix, consent=True, password=password)
    if args.json:
        print(json.dumps({"damages": [{"path": str(d.path), "what": d.what, "repair": d.repair} for d in damages],
                          "repaired": done, **facts}, indent=2))
    else:
        for line in done:
            print(f"repaired: {line}")
        for d in damages:
            print(f"damaged: {d.line(out)}")
        if not damages:
            said = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in facts.items())
            print(f"{out}: consistent ({said})")
    return 1 if damages else 0
