"""``raycrawl status``: the live state of a crawl, read from its Redis."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import layout


def register(subparsers) -> None:
    p = subparsers.add_parser("status", help="live state of a crawl (frontier sizes, counters) from Redis",
                              description="Print the frontier and the crawl counters of a running or "
                              "stopped crawl. With --out and no --redis-url, the crawl's embedded Redis "
                              "is started on its data if it is not running.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--out", type=Path, help="crawl directory (uses its redis-url file or embedded data)")
    src.add_argument("--redis-url", help="Redis of the crawl")
    p.add_argument("--prefix", default=Settings.redis_prefix,
                   help=f"key prefix of the crawl (default {Settings.redis_prefix})")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handle)


def read_status(redis_url: str, prefix: str = Settings.redis_prefix) -> dict:
    """Counters and frontier sizes of the crawl stored under ``prefix`` in ``redis_url``."""
    import redis

    from raycrawl.storage.redis_frontier import RedisFrontier

    try:
        client = redis.Redis.from_url(redis_url)
    except ValueError as exc:
        raise UserError(f"--redis-url {redis_url!r}: {exc}") from None
    try:
        f = RedisFrontier(client, prefix, register=False)
        if not f.has_crawl():
            raise UserError(f"no crawl under prefix {prefix!r} in {redis_url}")
        meta = f.meta()
        from collections import Counter

        return {"frontier": f.counts(), "stats": f.stats(),
                "sieve_bytes_distributed": sum(f.all_sieve_offsets().values()),  # every front queue's
                "shards": dict(sorted(Counter(f.shard_owners().values()).items())),
                "started": float(meta.get("started", 0))}
    except redis.ConnectionError as exc:
        raise UserError(f"cannot reach Redis at {redis_url}: {exc}") from None
    finally:
        client.close()


def _answers(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
        client.close()
        return True
    except (redis.RedisError, ValueError):
        return False


def handle(args: argparse.Namespace) -> int:
    from raycrawl.redis_server import redis_url_for

    if args.out is not None:
        url_file = layout(args.out).redis_url
        if not (layout(args.out).redis).is_dir() and not url_file.exists():
            raise UserError(f"{args.out} holds no crawl (no redis/ directory)")
        live = url_file.read_text().strip() if url_file.exists() else None
        if live and _answers(live):
            st = read_status(live, args.prefix)
        else:  # the crawl is not running: open its data with a private server
            from raycrawl.storage.crawl_check import check_aof, refusal

            damages = check_aof(layout(args.out).redis)
            if damages:  # a server started on it would write an empty AOF over the old one
                raise UserError(refusal(damages, args.out, "cannot open the crawl's Redis"))
            with redis_url_for(None, layout(args.out).redis) as url:
                st = read_status(url, args.prefix)
    else:
        st = read_status(args.redis_url, args.prefix)
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        fr, stats = st["frontier"], st["stats"]
        print(f"pages {stats.get('pages', 0)}  front {fr['front']}  queued {fr['queued']}  "
              f"virtualized {fr['virtualized']}  in-flight {fr['inflight']}  hosts {fr['hosts']}")
        errors = {k[6:]: v for k, v in stats.items() if k.startswith("error:")}
        if st["shards"]:
            print("agents " + "  ".join(f"{a}:{n} shards" for a, n in st["shards"].items()))
        print("errors " + ("  ".join(f"{k}:{v}" for k, v in sorted(errors.items())) or "none"))
    return 0
