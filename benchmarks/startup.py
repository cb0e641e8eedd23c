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
"""

from __future__ import annotations

import argparse
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
    import raycrawl.actors.agent as agent
    import raycrawl.actors.crew as crew
    import raycrawl.actors.distributor as distributor
    import raycrawl.redis_server as redis_server

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


def one_crawl(web, env: dict[str, str], work: Path) -> dict[str, float]:
    env = {**env, "STARTUP_TIMELINE": str(work / "timeline.json"), "STARTUP_MARKS": str(work / "marks.json")}
    web.flush_log()
    n0 = len(web.requests())
    cmd = [sys.executable, __file__, "--probe", "crawl", "--seeds", str(web.seeds_file), "--out", str(work / "out"),
           "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--max-pages", "300"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
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
    args = ap.parse_args()
    from raycrawl.websim import Websim

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
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


if __name__ == "__main__":
    main()
