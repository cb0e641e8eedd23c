"""``raycrawl status``: the live state of a crawl, read from its Redis."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from raycrawl.credentials import scrub
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
    add_password_option(p)
    p.add_argument("--prefix", default=Settings.redis_prefix,
                   help=f"key prefix of the crawl (default {Settings.redis_prefix})")
    p.add_argument("--hosts", type=int, default=10, metavar="N",
                   help="hosts listed, most fetched first (default 10; 0 = none)")
    p.add_argument("--interval", type=float, default=2.0, metavar="S",
                   help="of a running crawl, the current rate is the pages committed over this many "
                   "seconds (default 2; 0 = do not measure)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handle)


def add_password_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redis-password-file", metavar="FILE",
                   help="file holding the password of the crawl's Redis (else $RAYCRAWL_REDIS_PASSWORD)")


def given_password(args: argparse.Namespace) -> str | None:
    """The Redis password a command was given (a file, else the environment), or None."""
    from raycrawl.credentials import redis_password

    return redis_password(getattr(args, "redis_password_file", None))


def read_status(redis_url: str, prefix: str = Settings.redis_prefix, hosts: int = 10) -> dict:
    """Counters and frontier sizes of the crawl stored under ``prefix`` in ``redis_url``; the
    ``hosts`` hosts with most URLs done (:func:`per_host`)."""
    import redis

    from raycrawl.actors.cluster import heartbeat
    from raycrawl.storage.operator_control import Control
    from raycrawl.storage.redis_frontier import RedisFrontier

    try:
        client = redis.Redis.from_url(redis_url)
    except ValueError as exc:
        raise UserError(f"--redis-url {scrub(redis_url)!r}: {exc}") from None
    try:
        f = RedisFrontier(client, prefix, register=False)
        if not f.has_crawl():
            raise UserError(f"no crawl under prefix {prefix!r} in {scrub(redis_url)}")
        meta = f.meta()
        from collections import Counter

        stats = f.stats()
        return {"frontier": f.counts(), "stats": stats,
                "by_status": {k[7:]: v for k, v in sorted(stats.items()) if k.startswith("status:")},
                "hosts": per_host(f)[:hosts] if hosts > 0 else [],
                "sieve_bytes_distributed": sum(f.all_sieve_offsets().values()),  # every front queue's
                "shards": dict(sorted(Counter(f.shard_owners().values()).items())),
                "operator": Control(client, prefix).state(),
                "started": float(meta.get("started", 0)),
                "alive": f.alive(heartbeat.TTL)}
    except redis.ConnectionError as exc:
        raise UserError(f"cannot reach Redis at {scrub(redis_url)}: {exc}") from None
    finally:
        client.close()


def format_operator(op: dict) -> list[str]:
    lines = ["operator: " + ("PAUSED" if op["paused"] else "running") + ("  (stop requested)" if op["stop"] else "")]
    lines += [f"  {rule} = {r['value']}  (by {r['who']})" for rule, r in op["rules"].items()]
    return lines


def per_host(f) -> list[dict]:  # noqa: ANN001 - a RedisFrontier
    """Every host's URLs: ``scheduled`` (ever queued), ``queued`` (in Redis or on disk),
    ``in_flight`` and ``done`` (the rest: committed), most done first."""
    from collections import Counter

    scheduled = {h.decode(): int(n) for h, n in f.r.hgetall(f.k.hcount).items()}
    names = sorted(scheduled)
    flying = Counter(h.decode() for h in f.r.hvals(f.k.inflight))
    on_disk = f.virtualized_of(names)  # each agent's virtual queues
    queued = dict(zip(names, f.queue_lengths(names), strict=True))
    rows = [{"host": h, "scheduled": n, "queued": queued[h] + on_disk.get(h, 0), "in_flight": flying[h]}
            for h, n in scheduled.items()]
    for row in rows:
        row["done"] = row["scheduled"] - row["queued"] - row["in_flight"]
    return sorted(rows, key=lambda r: (-r["done"], r["host"]))


def _answers(url: str) -> bool:
    """The running crawl's Redis answers at ``url``; one that wants a password (this command was
    not given, or a wrong one) is a UserError, not a crawl that stopped."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
        client.close()
        return True
    except redis.AuthenticationError:
        raise UserError(f"the crawl's Redis ({scrub(url)}) wants a password: give --redis-password-file FILE "
                        "or set $RAYCRAWL_REDIS_PASSWORD") from None
    except (redis.RedisError, ValueError):
        return False


@contextlib.contextmanager
def crawl_redis(out: Path | None, redis_url: str | None, password: str | None = None):
    """(URL, running) of a crawl's Redis: ``redis_url``; or the running crawl's in ``out``; or, when
    it is not running, a private server started on its data for the time of the ``with``.
    ``password`` goes into the URL (``OUT/redis-url`` holds it as ``***``)."""
    from raycrawl.credentials import with_password
    from raycrawl.redis_server import redis_url_for

    if out is None:
        yield with_password(redis_url, password) if redis_url else redis_url, True
        return
    url_file = layout(out).redis_url
    if not (layout(out).redis).is_dir() and not url_file.exists():
        raise UserError(f"{out} holds no crawl (no redis/ directory)")
    live = url_file.read_text().strip() if url_file.exists() else None
    live = with_password(live, password) if live and password else live
    if live and _answers(live):
        yield live, True
        return
    from raycrawl.storage.crawl_check import check_aof, refusal

    damages = check_aof(layout(out).redis)
    if damages:  # a server started on it would write an empty AOF over the old one
        raise UserError(refusal(damages, out, "cannot open the crawl's Redis"))
    with redis_url_for(None, layout(out).redis) as url:
        yield url, False


def handle(args: argparse.Namespace) -> int:
    if args.hosts < 0 or not args.interval >= 0:
        raise UserError("--hosts and --interval must not be negative")
    with crawl_redis(args.out, args.redis_url, given_password(args)) as (url, answers):
        if answers:  # its Redis answers: running if the crawl's heartbeat says so (actors/cluster/heartbeat.py)
            st = read_live(url, args)
        else:
            st = read_status(url, args.prefix, args.hosts)
            st["running"] = False
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print_status(st)
    return 0


def read_live(url: str, args: argparse.Namespace) -> dict:
    """The status of a crawl whose Redis answers, with its elapsed time and current rate: the
    pages committed over ``--interval`` seconds (None when not measured)."""
    import time

    st = read_status(url, args.prefix, args.hosts)
    if not st["alive"]:  # a stopped crawl whose state an external Redis keeps
        return {**st, "running": False}
    rate = None
    if args.interval > 0:
        t0, p0 = time.time(), st["stats"].get("pages", 0)
        time.sleep(args.interval)
        st = read_status(url, args.prefix, args.hosts)
        rate = round((st["stats"].get("pages", 0) - p0) / (time.time() - t0), 2)
    st.update(running=True, rate=rate, elapsed_s=round(time.time() - st["started"], 1) if st["started"] else None)
    return st


def print_status(st: dict) -> None:
    fr, stats = st["frontier"], st["stats"]
    if st.get("running"):
        rate = "" if st.get("rate") is None else f"  {st['rate']:.1f} pages/s now"
        elapsed = "" if st.get("elapsed_s") is None else f" for {st['elapsed_s']:.0f} s"
        print(f"running{elapsed}{rate}")
    else:
        print("not running (its state read back from its Redis)")
    print(f"pages {stats.get('pages', 0)}  front {fr['front']}  queued {fr['queued']}  "
          f"virtualized {fr['virtualized']}  in-flight {fr['inflight']}  hosts {fr['hosts']}")
    errors = {k[6:]: v for k, v in stats.items() if k.startswith("error:")}
    if st["shards"]:
        print("agents " + "  ".join(f"{a}:{n} shards" for a, n in st["shards"].items()))
    print("status " + ("  ".join(f"{k}:{v}" for k, v in st["by_status"].items()) or "none"))
    print("errors " + ("  ".join(f"{k}:{v}" for k, v in sorted(errors.items())) or "none"))
    if st.get("operator") and (st["operator"]["paused"] or st["operator"]["rules"] or st["operator"]["stop"]):
        print("\n".join(format_operator(st["operator"])))
    if st["hosts"]:
        width = max(len(r["host"]) for r in st["hosts"])
        print(f"{'host':<{width}}  {'done':>7} {'queued':>7} {'flying':>6}")
        for r in st["hosts"]:
            print(f"{r['host']:<{width}}  {r['done']:>7} {r['queued']:>7} {r['in_flight']:>6}")
