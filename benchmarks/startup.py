"""Command → first request of ``raycrawl crawl``, step by step, today's code beside an earlier
commit's in the same run (issue 50), and Ray's own start on the machine for scale.

Each run crawls websim's clean web (``--hosts``, 300 pages) from a fresh ``--out`` with default
settings, a local Ray and the embedded Redis. The crawl's own process is this script in
``--probe`` mode: it runs the CLI after wrapping a few calls to time them — the embedded Redis's
start, ``ray.init``, the agent's crew (its actors made and its fetchers started) — and dumps
``ray.timeline()`` before Ray shuts down, for each actor's ``__init__`` (when it began, how long it
ran). The first request is websim's log's first. "Ray alone" is ``import ray`` + ``ray.init`` (the
crawl's options) + a first actor's call, in a process of its own. Rounds alternate the codes; the
medians are printed.

    .venv/bin/python benchmarks/startup.py                       # HEAD against 9cc97fd, 3 rounds
    .venv/bin/python benchmarks/startup.py --base 57a5966 --rounds 5
    .venv/bin/python benchmarks/startup.py --address             # HEAD joining a running cluster

``--address``: a local cluster is started once (``ray start --head``, as a user's would be running)
and each crawl joins it with ``--address`` (HEAD only: a joined cluster's workers run the code the
cluster was started with). The issue's bound there is 2 s from the command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from code_at import env_at  # noqa: E402

STEPS = ("import_ray", "redis_start", "redis_end", "ray_init_end", "crew_start", "crew_end", "agent_started",
         "first_drain_start", "first_drain_end", "first_step_start", "first_step_end", "first_request")


def probe() -> None:
    """The crawl's own process, its steps timed (module doc)."""
    t0 = time.time()
    import ray

    marks = {"import_ray": time.time() - t0}

    def timed(owner, attr: str, start: str | None, end: str) -> None:
        original = getattr(owner, attr, None)
        if original is None:
            return

        def wrapper(*a, **k):
            t = time.time()
            result = original(*a, **k)
            if start:
                marks.setdefault(start, t - t0)
            marks.setdefault(end, time.time() - t0)
            return result

        setattr(owner, attr, wrapper)

    shutdown = ray.shutdown

    def dump_then_shutdown(*a, **k):
        if ray.is_initialized():
            ray.timeline(filename=os.environ["STARTUP_TIMELINE"])
        return shutdown(*a, **k)

    timed(ray, "init", "ray_init_start", "ray_init_end")
    ray.shutdown = dump_then_shutdown
    import importlib

    import raycrawl.actors
    import raycrawl.redis_server as redis_server

    def part(room: str, name: str):  # noqa: ANN202 - a module, where it is at the code measured
        if (Path(raycrawl.actors.__path__[0]) / room).is_dir():
            return importlib.import_module(f"raycrawl.actors.{room}.{name}")
        return importlib.import_module(f"raycrawl.actors.{name}")  # before actors/ had rooms (issue 51)

    agent, crew, distributor = part("cluster", "agent"), part("cluster", "crew"), part("frontier", "distributor")

    timed(redis_server.EmbeddedRedis, "__enter__", "redis_start", "redis_end")
    timed(crew.Crew, "__init__", "crew_start", "crew_end")
    timed(agent.Agent, "start", None, "agent_started")
    timed(crew.Crew, "drain", "first_drain_start", "first_drain_end")
    timed(distributor.Distributor, "step", "first_step_start", "first_step_end")
    from raycrawl.cli import main

    sys.argv = ["raycrawl", *sys.argv[2:]]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    Path(os.environ["STARTUP_MARKS"]).write_text(json.dumps({"t0": t0, "exit": code, **marks}))


def ray_alone(env: dict[str, str]) -> float:
    script = ("import time; t0 = time.time(); import ray\n"
              "ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False,"
              " configure_logging=False, _system_config={'gcs_rpc_server_reconnect_timeout_s': 5})\n"
              "@ray.remote(num_cpus=0)\nclass A:\n    def f(self): return 1\n"
              "a = A.remote(); ray.get(a.f.remote()); print(time.time() - t0); ray.shutdown()\n")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    return float(done.stdout.strip().splitlines()[-1])


def one_crawl(web, env: dict[str, str], work: Path, address: str | None = None) -> dict[str, float]:
    env = {**env, "STARTUP_TIMELINE": str(work / "timeline.json"), "STARTUP_MARKS": str(work / "marks.json")}
    web.flush_log()
    n0 = len(web.requests())
    cmd = [sys.executable, __file__, "--probe", "crawl", "--seeds", str(web.seeds_file), "--out", str(work / "out"),
           "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--max-pages", "300",
           *(["--address", address] if address else [])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert (work / "marks.json").exists(), done.stderr[-3000:]
    marks = json.loads((work / "marks.json").read_text())
    assert marks["exit"] == 0, done.stderr[-3000:]
    t0 = marks.pop("t0")
    web.flush_log()
    marks["first_request"] = min(r.start for r in web.requests()[n0:]) - t0
    for event in json.loads((work / "timeline.json").read_text()):
        where = event.get("cat", "")  # "task::<actor name>:<Class>.__init__" (the event's name: "__init__")
        if event.get("name") == "__init__" and where.endswith(".__init__"):
            actor = where.rsplit(":", 1)[-1].split(".")[0]
            marks.setdefault(f"{actor} init begins", event["ts"] / 1e6 - t0)
            marks.setdefault(f"{actor} init s", event.get("dur", 0) / 1e6)
    return marks


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        probe()
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="9cc97fd", help="the earlier commit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--address", action="store_true", help="HEAD joining a running local cluster (module doc)")
    args = ap.parse_args()
    from raycrawl.websim import Websim

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
    if args.address:
        joined(args, env)
        return
    codes = {"HEAD": env_at("HEAD", env), args.base: env_at(args.base, env)}
    rows: dict[str, list[dict[str, float]]] = {c: [] for c in codes}
    alone: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=args.hosts, ips=max(1, args.hosts // 10), seed=1,
                                                      clean=True, out_dir=Path(tmp) / "web") as web:
        for r in range(args.rounds):
            alone.append(ray_alone(env))
            for code, code_env in (codes.items() if r % 2 == 0 else reversed(codes.items())):
                work = Path(tmp) / f"{code}-{r}"
                work.mkdir()
                rows[code].append(one_crawl(web, code_env, work))
                print(f"round {r} {code}: first request {rows[code][-1]['first_request']:.2f} s", flush=True)
    print(f"\nRay alone (import, init, first actor call): median {statistics.median(alone):.2f} s "
          f"({', '.join(f'{x:.2f}' for x in alone)})")
    keys = [k for k in STEPS if all(k in m for ms in rows.values() for m in ms)]
    keys += sorted({k for ms in rows.values() for m in ms for k in m if k not in STEPS and k != "exit"})
    print(f"\n{'seconds from the command (median)':44}" + "".join(f"{c:>14}" for c in codes))
    for k in keys:
        vals = [statistics.median([m[k] for m in rows[c] if k in m]) if any(k in m for m in rows[c]) else None
                for c in codes]
        print(f"{k:44}" + "".join(f"{v:14.2f}" if v is not None else f"{'-':>14}" for v in vals))
    first = {c: statistics.median(m["first_request"] for m in rows[c]) for c in codes}
    print("\ncommand → first request beyond Ray alone: " + ", ".join(
        f"{c} +{first[c] - statistics.median(alone):.2f} s" for c in codes))


def stop_cluster(sid: int) -> None:
    """End every process of session ``sid`` (the cluster's: ``ray stop`` would end every Ray on the
    machine, and Ray's agents rename themselves, so only their session finds them all)."""
    import signal

    from crawl_vs_scrapy import session_cpu

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_cpu(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 20
        while session_cpu(sid) and time.monotonic() < deadline:
            time.sleep(0.2)


def joined(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Command → first request of crawls joining one running local cluster."""
    from raycrawl.redis_server import free_port
    from raycrawl.websim import Websim

    port = free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    with tempfile.TemporaryDirectory(prefix="rs") as tmp:
        # (ports of its own: a Ray already running on the machine holds the defaults; a session of its own)
        head = subprocess.Popen([str(ray_bin), "start", "--head", f"--port={port}", "--num-cpus=2",
                                 "--include-dashboard=false", f"--dashboard-agent-listen-port={free_port()}",
                                 f"--ray-client-server-port={free_port()}", "--node-ip-address=127.0.0.1",
                                 "--disable-usage-stats", f"--temp-dir={tmp}/ray"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        if head.wait(300) != 0:
            stop_cluster(head.pid)
            raise SystemExit("ray start --head failed")
        firsts: list[float] = []
        try:
            with Websim(hosts=args.hosts, ips=max(1, args.hosts // 10), seed=1, clean=True,
                        out_dir=Path(tmp) / "web") as web:
                for r in range(args.rounds):
                    work = Path(tmp) / f"joined-{r}"
                    work.mkdir()
                    marks = one_crawl(web, env, work, address=f"127.0.0.1:{port}")
                    firsts.append(marks["first_request"])
                    keys = [k for k in STEPS if k in marks] + sorted(k for k in marks if k not in STEPS and k != "exit")
                    print(f"round {r}: " + ", ".join(f"{k} {marks[k]:.2f}" for k in keys), flush=True)
        finally:
            stop_cluster(head.pid)
    print(f"\njoining a running cluster (--address): command → first request median {statistics.median(firsts):.2f} s "
          f"({', '.join(f'{x:.2f}' for x in firsts)}); the issue's bound: 2 s")


if __name__ == "__main__":
    main()
