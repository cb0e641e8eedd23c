"""Soak: a broad crawl at scale, watched per tenth — does anything grow with pages that should not?

websim serves ``--hosts`` hosts (about ``--pages-per-host`` pages each; its aiohttp server keeps idle
connections for an hour, aiohttp's default — nginx keeps them 75 s, Apache 5 s), and ``raycrawl crawl`` runs over it as a user runs it (default
settings but the politeness delays) up to ``--pages``. A sampler reads, every second, the crawl's
committed pages (Redis), Redis's ``used_memory``, the AOF's size, and the RSS and open files of every
process of the crawl (driver, Redis, each Ray actor, Ray's own; also their private memory, without
the shared pages of Ray's object store); at each tenth of ``--pages`` it
prints one row. At the end: Redis bytes per host and per page against the BUbiNG-class budget
(400 B per host + 200 B per page), the rate of the last tenth against the second, the RSS drift of
every process after the first tenth, and the most files any fetch actor held open.

    .venv/bin/python benchmarks/soak.py [--hosts 100000] [--pages 1000000] [--pages-per-host 10]

``--code DIR`` runs another checkout's raycrawl (e.g. a worktree of an older commit), crawler and
websim both, for a before/after table (the same seed gives the same web if websim did not change).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from raycrawl.websim import Websim  # noqa: E402


def processes(root: int) -> dict[int, str]:
    """pid → a short name, for ``root`` and every descendant (Ray's workers by their actor)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out[pid] = name_of(cmd)
        todo += children.get(pid, [])
    return out


def name_of(cmd: str) -> str:
    if cmd.startswith("ray::"):  # ray::FetchActor.drain, ray::raycrawl-fetch-rc:agent0-0:FetchActor → FetchActor
        return cmd.split()[0][5:].rsplit(":", 1)[-1].split(".")[0]
    for key in ("valkey-server", "redis-server", "gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py",
                "runtime_env", "raycrawl crawl"):
        if key in cmd:
            return {"raycrawl crawl": "driver", "valkey-server": "redis"}.get(key, key)
    return "other:" + cmd.split()[0].rsplit("/", 1)[-1][:20] if cmd else "?"


def status_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory field of /proc/PID/status in MB: ``VmRSS``, or ``RssAnon`` (the anonymous pages,
    which unlike private memory do not jump when another process unmaps a library or Ray's store)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def private_mb(pid: int) -> float:
    """Memory only this process maps (smaps_rollup's Private_*): RSS without the shared pages —
    Ray's plasma object store and shared libraries — that every process mapping them counts."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
        return (int(fields["Private_Clean"].split()[0]) + int(fields["Private_Dirty"].split()[0])) / 1024
    except (OSError, KeyError, ValueError):
        return 0.0


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


class Sampler(threading.Thread):
    """Every second: pages, Redis memory, AOF size, per-process RSS and open files."""

    def __init__(self, crawl: subprocess.Popen, out: Path) -> None:
        super().__init__(daemon=True)
        self.crawl, self.out = crawl, out
        self.samples: list[dict] = []
        self.max_files: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        import redis

        client = None
        while not self.stop.wait(1.0):
            if client is None:
                try:
                    client = redis.Redis.from_url((self.out / "redis-url").read_text().strip(), socket_timeout=5)
                except OSError:
                    continue
            try:
                pages = int(client.hget("rc:stats", "pages") or 0)
                used = int(client.info("memory")["used_memory"])
            except redis.RedisError:
                continue
            procs = processes(self.crawl.pid)
            rss: dict[str, float] = {}
            private: dict[str, float] = {}
            anon: dict[str, float] = {}
            for pid, name in procs.items():
                rss[name] = rss.get(name, 0.0) + status_mb(pid)
                private[name] = private.get(name, 0.0) + private_mb(pid)
                anon[name] = anon.get(name, 0.0) + status_mb(pid, "RssAnon")
                files = open_files(pid)
                self.max_files[name] = max(self.max_files.get(name, 0), files)
            aof = sum(f.stat().st_size for f in (self.out / "redis").rglob("*") if f.is_file())
            self.samples.append({"t": time.monotonic(), "pages": pages, "redis_used": used, "aof": aof, "rss": rss,
                                 "private": private, "anon": anon})


def tenths(samples: list[dict], target: int) -> list[dict]:
    """The first sample at or past each tenth of ``target`` pages."""
    rows, k = [], 1
    for s in samples:
        while k <= 10 and s["pages"] >= target * k / 10:
            rows.append({**s, "tenth": k})
            k += 1
    return rows


def package_of(checkout: Path, into: Path) -> Path:
    """A directory where ``import raycrawl`` finds ``checkout``'s code as the wheel lays it out
    (``raycrawl.storage`` = ``storage/``, …): ``checkout``'s ``core/`` (``raycrawl/`` before
    2026-11-26) with its sibling packages linked in."""
    import shutil

    pkg = into / "raycrawl"
    shutil.copytree(checkout / ("core" if (checkout / "core").is_dir() else "raycrawl"), pkg, symlinks=True)
    for name in ("actors", "storage", "policies", "tasks", "websim"):
        (pkg / name).symlink_to(checkout / name)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--pages-per-host", type=float, default=10.0)
    ap.add_argument("--host-delay", type=float, default=0.1)
    ap.add_argument("--ip-delay", type=float, default=0.0)
    ap.add_argument("--raycrawl-args", default="", help="extra settings for the crawl (\"-s delay_factor=0\")")
    ap.add_argument("--clean", action="store_true", help="websim --clean: no mirrors, traps, faults or slow hosts")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="checkout (e.g. a git worktree of another commit) whose raycrawl and websim run (default: this one)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the crawl directory here")
    ap.add_argument("--json", type=Path, default=None, help="write the samples and summary here")
    ap.add_argument("--heap", type=Path, default=None,
                    help="every process of the crawl dumps tracemalloc snapshots here (slower; "
                         "benchmarks/heap_diff.py reads them)")
    ap.add_argument("--heap-every", type=float, default=300.0, help="seconds between heap snapshots")
    args = ap.parse_args()

    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
           "PYTHONPATH": str(args.code)}
    if args.heap:
        env.update(RAYCRAWL_HEAP_DIR=str(args.heap.resolve()), RAYCRAWL_HEAP_EVERY=str(args.heap_every))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        code = package_of(args.code.resolve(), tmp / "code") if args.code.resolve() != ROOT else ROOT
        env["PYTHONPATH"] = os.environ["PYTHONPATH"] = str(code)  # websim's server runs that code too
        os.chdir(code)
        out = args.keep or tmp / "crawl"
        t0 = time.monotonic()
        with Websim(hosts=args.hosts, ips=args.ips, seed=28, out_dir=tmp / "web", clean=args.clean,
                    pages_per_host_mean=args.pages_per_host, start_timeout=1800) as web:
            print(f"websim: {args.hosts:,} hosts on {args.ips} loopback IPs, ready in {time.monotonic() - t0:.0f} s "
                  f"(code: {args.code})", flush=True)
            cmd = [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                   "--resolve", str(web.hosts_file), "--allow-networks", "127.0.0.0/8", "--host-delay",
                   str(args.host_delay), "--ip-delay", str(args.ip_delay), "--max-pages", str(args.pages), "--json",
                   *shlex.split(args.raycrawl_args)]
            log = open(tmp / "crawl.stderr", "wb")  # noqa: SIM115 - closed below
            crawl = subprocess.Popen(cmd, env=env, cwd=code, stdout=subprocess.PIPE, stderr=log,
                                     start_new_session=True)
            sampler = Sampler(crawl, out)
            sampler.start()
            stdout, _ = crawl.communicate()
            sampler.stop.set()
            sampler.join()
            log.close()
            if crawl.returncode:
                sys.stderr.write((tmp / "crawl.stderr").read_text(errors="replace")[-3000:])
                raise SystemExit(f"crawl failed ({crawl.returncode})")
            report = json.loads(stdout)
            robots_connect = sum(1 for line in (tmp / "crawl.stderr").read_text(errors="replace").splitlines()
                                 if "out of file descriptors" in line)
        summarize(args, sampler, report, robots_connect)
    if crawl.returncode == 0 and args.json:
        args.json.write_text(json.dumps({"samples": sampler.samples, "max_files": sampler.max_files}))


def summarize(args: argparse.Namespace, sampler: Sampler, report: dict, local_failures: int) -> None:
    rows = tenths(sampler.samples, args.pages)
    if len(rows) < 3:
        raise SystemExit(f"too few samples ({len(rows)} tenths reached): {report.get('stopped')}")
    names = sorted({n for r in rows for n in r["rss"] if not n.startswith("other:")})
    print(f"\n{'tenth':>5} {'pages':>9} {'pages/s':>8} {'Redis MB':>9} {'AOF MB':>7} " + " ".join(f"{n[:13]:>13}" for n in names))
    prev = {"t": sampler.samples[0]["t"], "pages": 0}
    for r in rows:
        rate = (r["pages"] - prev["pages"]) / max(1e-9, r["t"] - prev["t"])
        r["rate"] = rate
        print(f"{r['tenth']:>5} {r['pages']:>9,} {rate:>8.0f} {r['redis_used'] / 2**20:>9.1f} {r['aof'] / 2**20:>7.1f} "
              + " ".join(f"{r['rss'].get(n, 0):>13.0f}" for n in names))
        prev = r
    print("(RSS in MB, summed over the processes of that name)")
    last, second = rows[-1], rows[1]
    pages = int(report.get("pages", last["pages"]))
    budget = 400 * args.hosts + 200 * pages
    print(f"\nRedis used_memory after {pages:,} pages over {args.hosts:,} hosts: {last['redis_used'] / 2**20:.1f} MB = "
          f"{last['redis_used'] / pages:,.0f} B/page; budget 400 B/host + 200 B/page = {budget / 2**20:.1f} MB "
          f"→ {last['redis_used'] / budget:.2f} of it")
    print(f"rate: last tenth {last['rate']:.0f} pages/s, second {second['rate']:.0f} → {last['rate'] / second['rate']:.0%}")
    first = rows[0]
    # A process's last reading: the last sample it was alive in (the actors end with the crawl, so
    # the tenth-10 row may have caught them gone).
    for kind in ("rss", "private", "anon"):
        final = {n: next((s[kind][n] for s in reversed(sampler.samples) if s[kind].get(n)), 0) for n in names}
        drift = {n: (final[n] - first[kind].get(n, 0)) / max(1.0, first[kind].get(n, 0)) for n in names}
        print(f"{ {'rss': 'RSS', 'private': 'private memory', 'anon': 'anonymous memory'}[kind]} from the first tenth to the end: "
              + ", ".join(f"{n} {first[kind].get(n, 0):.0f}→{final[n]:.0f} MB {d:+.0%}" for n, d in drift.items()))
    later = [s for s in sampler.samples if s["t"] >= first["t"]]
    print("anonymous memory, peak after the first tenth (the driver's includes the end of run: crawl.log, graph): "
          + ", ".join(f"{n} {max(s['anon'].get(n, 0) for s in later):.0f} MB" for n in names))
    print("most open files: " + ", ".join(f"{n} {f}" for n, f in sorted(sampler.max_files.items()) if not n.startswith("other:")))
    print(f"requests that found no file descriptor (retried, never held against a host): {local_failures}")
    print(f"report: stopped={report.get('stopped')}, duplicates {report.get('duplicates')}, "
          f"robots-unavailable={report.get('errors', {}).get('robots-unavailable', 0)}, errors {report.get('errors')}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
