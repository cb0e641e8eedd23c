"""Where a crawl's CPU goes: py-spy on the driver and on every Ray worker of a ``raycrawl crawl``,
over a steady window of the crawl, on websim's clean web.

Once the crawl has answered ``--warmup`` pages (websim's log), every process of the crawl's session
is sampled by ``py-spy record`` for ``--seconds`` (non-blocking, 100 Hz, idle threads left out).
Printed per process: CPU ms per page in the window (from /proc, pages from websim's log) and the
functions that hold most of its samples (self time, and time under a few named entry points).

    .venv/bin/python benchmarks/profile_crawl.py                     # 1000 hosts / 100 IPs, 20 s window
    .venv/bin/python benchmarks/profile_crawl.py --agents 4          # where the work of more agents goes
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from crawl_vs_scrapy import session_cpu  # noqa: E402

PY_SPY = Path(sys.executable).with_name("py-spy")
# py-spy names a frame "function (file:line)", the file relative to its package root: ours are these.
OURS = ("actors/", "storage/", "policies/", "tasks/", "core/", "websim/")


def session_procs(sid: int) -> dict[int, tuple[str, float]]:
    """pid → (process title, CPU seconds) of every process in session ``sid``."""
    out = {}
    for pid, cpu in session_cpu(sid).items():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out[pid] = (cmd[:60], cpu)
    return out


def role(title: str) -> str:
    if title.startswith("ray::"):
        return title.split()[0]
    for key in ("raycrawl crawl", "valkey-server", "raylet", "gcs_server", "dashboard", "log_monitor",
                "runtime_env", "monitor.py"):
        if key in title:
            return key
    return title.split()[0].rsplit("/", 1)[-1] if title else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--ips", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=1500, help="pages answered before sampling starts")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--agents", type=int, default=1, help="agents (one local Ray); the end sums CPU by role")
    ap.add_argument("--cpu-only", action="store_true", help="no py-spy (it slows a crawl of many processes): "
                    "CPU per process from /proc only")
    args = ap.parse_args()

    from raycrawl.websim import Websim

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=args.ips, seed=3, clean=True,
                                                      out_dir=Path(tmp) / "web") as web:
        cmd = [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
               str(Path(tmp) / "crawl"), "--resolve", str(web.hosts_file), "--allow-networks", "127.0.0.0/8",
               "--host-delay", "0.1", "--ip-delay", "0.02", "--max-urls-per-host", "1000", "--agents", str(args.agents)]
        crawl = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            while True:
                web.flush_log(0)
                if len(web.requests()) >= args.warmup or crawl.poll() is not None:
                    break
                time.sleep(0.5)
            before = session_procs(crawl.pid)
            n0, t0 = len(web.requests()), time.time()
            spies = {} if args.cpu_only else {pid: subprocess.Popen([str(PY_SPY), "record", "--nonblocking", "--rate", "100", "--format", "raw",
                                            "--duration", str(args.seconds), "--pid", str(pid),
                                            "--output", f"{tmp}/{pid}.txt"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for pid, (title, _) in before.items() if "python" in title or title.startswith("ray::")}
            for spy in spies.values():
                spy.wait()
            if args.cpu_only:
                time.sleep(args.seconds)
            after = session_procs(crawl.pid)
            web.flush_log(0)
            pages = len(web.requests()) - n0
            span = time.time() - t0
        finally:
            os.killpg(crawl.pid, 9)
        print(f"websim clean {args.hosts} hosts / {args.ips} IPs; window {span:.1f} s, {pages} requests "
              f"({pages / span:.0f}/s); CPU ms per request by process (py-spy samples: self time)")
        total = 0.0
        rows = []
        for pid, (title, cpu1) in after.items():
            cpu = cpu1 - before.get(pid, (title, 0.0))[1]
            total += cpu
            rows.append((cpu, pid, title))
        for cpu, pid, title in sorted(rows, reverse=True):
            if cpu < 0.05:
                continue
            print(f"\n{role(title):<28} {1000 * cpu / max(1, pages):7.3f} ms/request  ({cpu / span:.0%} of a core)")
            path = Path(f"{tmp}/{pid}.txt")
            if not path.exists():
                continue
            leaves: Counter[str] = Counter()
            ours: Counter[str] = Counter()  # inclusive time of the project's own functions
            n = 0
            for line in path.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if not count.isdigit():
                    continue
                frames = stack.split(";")
                leaves[frames[-1]] += int(count)
                for frame in {f for f in frames if f.rpartition("(")[2].startswith(OURS)}:
                    ours[frame] += int(count)
                n += int(count)
            print("    self time:")
            for frame, c in leaves.most_common(args.top):
                print(f"    {c / max(1, n):6.1%}  {frame[:110]}")
            print("    inclusive, raycrawl's functions:")
            for frame, c in ours.most_common(args.top):
                print(f"    {c / max(1, n):6.1%}  {frame[:110]}")
        by_role: Counter[str] = Counter()
        for cpu, _, title in rows:
            by_role[role(title).split(".")[0]] += cpu
        print(f"\nby role, summed over the {args.agents} agent(s): " + ", ".join(
            f"{r} {1000 * c / max(1, pages):.3f}" for r, c in by_role.most_common() if c >= 0.05) + " ms/request")
        print(f"all processes: {1000 * total / max(1, pages):.3f} ms CPU per request")


if __name__ == "__main__":
    main()
