"""Frontier memory as discovered URLs grow: raycrawl's sieve + workbench + virtualizer vs an
in-memory frontier (Scrapy's: a set of request fingerprints + a queue of URLs in RAM).

Feeds N URLs over a fixed set of hosts through the real sieve (disk), distributor, Redis workbench
(real valkey-server, AOF on) and virtualizer, and reports the resident memory of this process plus
the Redis server at checkpoints (100k … 2M). The peer keeps Scrapy's structures: a Python ``set`` of
40-hex SHA-1 fingerprints (RFPDupeFilter) and a ``deque`` of pending URLs (its memory queue),
measured in a separate process so neither run disturbs the other.

    .venv/bin/python benchmarks/frontier_memory.py                 # 100k → 500k (fast)
    .venv/bin/python benchmarks/frontier_memory.py --max 2000000   # up to 2M
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float:
    """Resident MB; ``field="RssAnon"`` leaves out file pages (the memory-mapped fingerprint store,
    which the kernel can drop at will)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def urls(n: int, hosts: int, start: int = 0):
    for i in range(start, start + n):
        yield f"http://host{i % hosts}.test/section{(i // hosts) % 97}/page-{i}.html?ref={i % 13}"


def checkpoints(maximum: int) -> list[int]:
    pts = [100_000, 250_000, 500_000, 1_000_000, 2_000_000]
    return [p for p in pts if p <= maximum]


def run_raycrawl(maximum: int, hosts: int, budget: int) -> list[dict]:
    import redis

    from raycrawl.actors.distributor import Distributor
    from raycrawl.actors.sieve_shards import SieveShards
    from raycrawl.actors.virtualizer import Virtualizer
    from raycrawl.actors.workbench import Workbench
    from raycrawl.policies.assignment import SHARDS
    from raycrawl.redis_server import EmbeddedRedis

    out = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
        client = redis.Redis.from_url(server.url)
        sieve = SieveShards(Path(tmp) / "sieve", range(SHARDS), batch_size=100_000, cache_size=100_000)
        wb = Workbench(client, "m:")
        virt = Virtualizer(Path(tmp) / "virt", wb.frontier, budget)
        dist = Distributor(wb, virt, front_size=10**9, batch=5000)
        ips = {f"host{h}.test": f"127.1.{h // 250}.{h % 250 + 1}" for h in range(hosts)}
        resolve = lambda names: {n: ips[n] for n in names}  # noqa: E731
        fed = 0
        t0 = time.time()
        for target in checkpoints(maximum):
            batch = []
            for u in urls(target - fed, hosts, fed):
                batch.append(u)
                if len(batch) == 10_000:
                    sieve.enqueue(batch)
                    batch = []
            sieve.enqueue(batch)
            fed = target
            while True:  # distribute everything the sieve has
                res = dist.step(sieve.read, resolve)
                if res.taken == 0 and sieve.exhausted(wb.frontier.sieve_offsets(dist.shards)):
                    break
            redis_rss = rss_mb(server.proc.pid)
            c = wb.frontier.counts()
            out.append({"urls": target, "process_mb": round(rss_mb(), 1), "redis_mb": round(redis_rss, 1),
                        "anon_mb": round(rss_mb(field="RssAnon") + rss_mb(server.proc.pid, "RssAnon"), 1),
                        "total_mb": round(rss_mb() + redis_rss, 1), "in_redis": c["queued"],
                        "on_disk": c["virtualized"], "s": round(time.time() - t0, 1)})
            print(json.dumps(out[-1]), file=sys.stderr)
        client.close()
    return out


def run_peer(maximum: int, hosts: int) -> list[dict]:
    seen: set[str] = set()
    queue: deque[str] = deque()
    fed = 0
    out = []
    t0 = time.time()
    for target in checkpoints(maximum):
        for u in urls(target - fed, hosts, fed):
            fp = hashlib.sha1(u.encode()).hexdigest()
            if fp not in seen:
                seen.add(fp)
                queue.append(u)
        fed = target
        out.append({"urls": target, "process_mb": round(rss_mb(), 1), "s": round(time.time() - t0, 1)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max", type=int, default=500_000, help="largest number of URLs (default 500k)")
    ap.add_argument("--hosts", type=int, default=2000, help="distinct hosts (default 2000)")
    ap.add_argument("--budget", type=int, default=50, help="URLs per host kept in Redis (default 50)")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        print(json.dumps(run_peer(args.max, args.hosts)))
        return
    base = rss_mb()
    ours = run_raycrawl(args.max, args.hosts, args.budget)
    peer = json.loads(subprocess.run([sys.executable, __file__, "--peer", "--max", str(args.max), "--hosts",
                                      str(args.hosts)], capture_output=True, text=True, check=True).stdout)
    print(f"frontier memory, {args.hosts} hosts, {args.budget} URLs/host in Redis (baseline process {base:.0f} MB)")
    print(f"{'URLs':>10} {'raycrawl MB':>12} {'(proc+redis)':>14} {'anon MB':>8} {'in Redis':>9} {'on disk':>9} "
          f"{'in-memory peer MB':>18} {'peer/ours':>9}")
    for o, p in zip(ours, peer, strict=True):
        print(f"{o['urls']:>10} {o['total_mb']:>12.1f} {o['process_mb']:>7.1f}+{o['redis_mb']:<6.1f} {o['anon_mb']:>8.1f} "
              f"{o['in_redis']:>9} {o['on_disk']:>9} {p['process_mb']:>18.1f} {p['process_mb'] / o['total_mb']:>9.2f}")
    growth = ours[-1]["total_mb"] - ours[0]["total_mb"]
    peer_growth = peer[-1]["process_mb"] - peer[0]["process_mb"]
    anon = ours[-1]["anon_mb"] - ours[0]["anon_mb"]
    print(f"growth {ours[0]['urls']}→{ours[-1]['urls']} URLs: raycrawl {growth:+.1f} MB ({anon:+.1f} MB anonymous), "
          f"peer {peer_growth:+.1f} MB")


if __name__ == "__main__":
    main()
