"""Frontier memory as discovered URLs grow: raycrawl's sieve + workbench + virtualizer vs an
in-memory frontier (Scrapy's: a set of request fingerprints + a queue of URLs in RAM).

Feeds N URLs over a fixed set of hosts through the real sieve (a Ray actor, as in a crawl: disk
store, LRU cache, batch buffer), distributor, Redis workbench (real valkey-server, AOF on) and
virtualizer, all with the crawl's default settings (``raycrawl.settings.Settings``: URLs per host
in Redis, sieve batch, URL cache), and reports at checkpoints (100k … 2M) the memory of the whole
process tree — this process, Ray's (GCS, raylet, the sieve's worker) and Redis — as the sum of
PSS (shared pages counted once). The distributor's front is unbounded, so every discovered URL
goes to Redis or to the virtualizer, the worst case for memory. The peer keeps Scrapy's
structures: a Python ``set`` of 40-hex SHA-1 fingerprints (RFPDupeFilter) and a ``deque`` of
pending URLs (its memory queue), measured in a separate process.

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
    pts = [100_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000]
    return [p for p in pts if p <= maximum]


def tree() -> list[int]:
    """This process and all its descendants (Ray's processes, Redis)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [int(Path("/proc/self").resolve().name)]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def pss_mb(pids: list[int], field: str = "Pss") -> float:
    """Sum of ``field`` (Pss; Pss_Anon leaves out file pages such as the sieve's memory-mapped
    fingerprint store, which the kernel can drop at will)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def run_raycrawl(maximum: int, hosts: int) -> list[dict]:
    import ray
    import redis

    from raycrawl.actors.cluster import crew_worker
    from raycrawl.actors.frontier.distributor import Distributor
    from raycrawl.actors.frontier.virtualizer import Virtualizer
    from raycrawl.actors.frontier.workbench import Workbench
    from raycrawl.policies.assignment import SHARDS, apply_shards
    from raycrawl.ray_start import start_ray
    from raycrawl.redis_server import EmbeddedRedis
    from raycrawl.settings import Settings

    s = Settings()
    out = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp) / "redis") as server:
        start_ray()
        client = redis.Redis.from_url(server.url)
        wb = Workbench(client, s.redis_prefix)
        apply_shards(wb.frontier, {shard: "agent0" for shard in range(SHARDS)})  # as a one-agent crawl does
        sieve = crew_worker.actor_class().remote(tmp, server.url, "agent0", Settings(out=tmp))  # (carries the sieve)
        virt = Virtualizer(Path(tmp) / "virt", wb.frontier, s.workbench_urls_per_host)
        dist = Distributor(wb, virt, front_size=10**9, batch=5000)
        ips = {f"host{h}.test": f"127.1.{h // 250}.{h % 250 + 1}" for h in range(hosts)}
        resolve = lambda names: {n: ips[n] for n in names}  # noqa: E731
        read = lambda offsets, n, levels, bias: ray.get(sieve.read_front.remote(offsets, n, levels, bias))  # noqa: E731
        fed = 0
        t0 = time.time()
        for target in checkpoints(maximum):
            batch: list[str] = []
            for u in urls(target - fed, hosts, fed):
                batch.append(u)
                if len(batch) == s.batch * 40:  # the agent sends a batch's links per call
                    ray.get(sieve.enqueue.remote(batch))
                    batch = []
            ray.get(sieve.enqueue.remote(batch))
            fed = target
            while True:  # distribute everything the sieve has
                res = dist.step(read, resolve)
                if res.taken == 0 and ray.get(sieve.exhausted.remote(wb.frontier.sieve_offsets(dist.queues))):
                    break
            pids = tree()
            c = wb.frontier.counts()
            out.append({"urls": target, "tree_mb": round(pss_mb(pids), 1), "anon_mb": round(pss_mb(pids, "Pss_Anon"), 1),
                        "processes": len(pids),
                        "redis_mb": round(pss_mb([server.proc.pid]), 1), "in_redis": c["queued"],
                        "on_disk": c["virtualized"], "s": round(time.time() - t0, 1)})
            by = {f"{Path(f'/proc/{pid}/comm').read_text().strip()}:{pid}": (round(pss_mb([pid]), 1), round(pss_mb([pid], "Pss_Anon"), 1)) for pid in pids
                  if Path(f"/proc/{pid}").exists()}
            print(json.dumps(out[-1]), json.dumps(by), file=sys.stderr)
        client.close()
        ray.shutdown()
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
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        print(json.dumps(run_peer(args.max, args.hosts)))
        return
    from raycrawl.settings import Settings

    ours = run_raycrawl(args.max, args.hosts)
    peer = json.loads(subprocess.run([sys.executable, __file__, "--peer", "--max", str(args.max), "--hosts",
                                      str(args.hosts)], capture_output=True, text=True, check=True).stdout)
    s = Settings()
    print(f"frontier memory, {args.hosts} hosts, default settings ({s.workbench_urls_per_host} URLs/host in Redis, "
          f"sieve batch {s.sieve_batch}, URL cache {s.url_cache}); whole process tree, PSS")
    print(f"{'URLs':>10} {'raycrawl MB':>12} {'of it Redis':>12} {'processes':>10} {'in Redis':>9} {'on disk':>9} "
          f"{'in-memory peer MB':>18} {'peer/ours':>9}")
    for o, p in zip(ours, peer, strict=True):
        print(f"{o['urls']:>10} {o['tree_mb']:>12.1f} {o['redis_mb']:>12.1f} {o['processes']:>10} {o['in_redis']:>9} "
              f"{o['on_disk']:>9} {p['process_mb']:>18.1f} {p['process_mb'] / o['tree_mb']:>9.2f}")
    growth = ours[-1]["tree_mb"] - ours[0]["tree_mb"]
    peer_growth = peer[-1]["process_mb"] - peer[0]["process_mb"]
    print(f"growth {ours[0]['urls']}→{ours[-1]['urls']} URLs: raycrawl {growth:+.1f} MB, peer {peer_growth:+.1f} MB")

if __name__ == "__main__":
    main()
