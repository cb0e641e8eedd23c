"""Run raycrawl as users of a cluster do: `ray start --head`, then `ray job submit --working-dir .
-- raycrawl crawl --address auto ...` (README "Running on a Ray cluster"), then `raycrawl status`
on the finished crawl. The crawl is audited from websim's request log."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from raycrawl.redis_server import free_port
from raycrawl.websim.audit import audit

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.slow
@pytest.mark.own_ray
def test_ray_job_submit_elastic_crawl(tmp_path) -> None:
    from raycrawl.websim import Websim

    ray_tmp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # AF_UNIX socket paths must stay short
    env = dict(os.environ, RAY_AUTH_MODE="disabled", PATH=f"{BIN}:{os.environ['PATH']}")
    gcs, dash, agent, client = free_port(), free_port(), free_port(), free_port()
    # Ports of our own, not the defaults: the test session's local Ray already holds those (its
    # dashboard agent on 52365 — then jobs find "no available agent").
    head = ["ray", "start", "--head", f"--port={gcs}", f"--dashboard-port={dash}", "--dashboard-host=127.0.0.1",
            f"--dashboard-agent-listen-port={agent}", f"--ray-client-server-port={client}",
            "--num-cpus=2", "--resources={\"agent\": 1}", "--disable-usage-stats",
            f"--temp-dir={ray_tmp}"]
    # (a session of its own: Ray's agents rename themselves, so only their session finds them all)
    started = subprocess.run(head, env=env, capture_output=True, text=True, timeout=180, start_new_session=True)
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        with Websim(hosts=20, ips=2, seed=5, out_dir=tmp_path / "web", pages_per_host_mean=4) as web:
            out = tmp_path / "crawl"
            submit = ["ray", "job", "submit", "--address", f"http://127.0.0.1:{dash}", "--working-dir", ".", "--",
                      "raycrawl", "crawl", "--address", "auto", "--elastic", "--seeds", str(web.seeds_file),
                      "--out", str(out), "--dns-server", "{}:{}".format(*web.dns_address),
                      "--allow-networks", "127.0.0.0/8", "--host-delay", "0.1", "--ip-delay", "0.02",
                      "--read-timeout", "3", "--max-retries", "1", "--retry-backoff", "0.5"]
            deadline = time.time() + 120
            while True:  # a fresh head's job agent may not be up yet: Ray says "try again later"
                job = subprocess.run(submit, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
                if "No available agent" not in job.stderr or time.time() > deadline:
                    break
                time.sleep(2)
            assert job.returncode == 0, (job.stdout + job.stderr)[-4000:]
            assert "succeeded" in job.stdout, job.stdout[-2000:]
            web.flush_log()
            report = json.loads((out / "report.json").read_text())
            assert report["stopped"] == "frontier empty" and report["pages"] > 30
            assert [a["agent"] for a in report["agents"]] == ["agent0"]  # one node with the agent resource
            result = audit(web.requests(), web.manifest, 0.1, 0.02)
            assert result.ok, result.summary()
            status = subprocess.run([str(BIN / "raycrawl"), "status", "--out", str(out), "--json"],
                                    env=env, capture_output=True, text=True, timeout=120)
            assert status.returncode == 0, status.stderr[-2000:]
            st = json.loads(status.stdout)
            assert st["stats"]["pages"] == report["pages"] and st["shards"] == {"agent0": 64}
    finally:
        stop_cluster(ray_tmp, session=started_session(ray_tmp))
        shutil.rmtree(ray_tmp, ignore_errors=True)


def started_session(temp_dir: str) -> int | None:
    """The session id of the cluster's processes (its GCS names ``temp_dir`` on its command line)."""
    for p in Path("/proc").glob("[0-9]*"):
        if b"gcs_server" in _read(p / "cmdline") and temp_dir.encode() in _read(p / "cmdline"):
            stat = _read(p / "stat")
            return int(stat[stat.rindex(b")") + 2:].split()[3])
    return None


def stop_cluster(temp_dir: str, session: int | None) -> None:
    """Stop the processes of the cluster started with ``temp_dir`` only. Not `ray stop`: it stops
    every Ray on the machine, the test session's own local Ray included. Ray's agents rename
    themselves (``ray::DashboardAgent``: ``temp_dir`` no longer on their command line), and one
    left behind spun for a minute at 30 % of a core looking for its GCS (measured): the session
    ``ray start`` was given finds them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in Path("/proc").glob("[0-9]*"):
            stat = _read(p / "stat")
            ours = temp_dir.encode() in _read(p / "cmdline") or (
                session is not None and stat and int(stat[stat.rindex(b")") + 2:].split()[3]) == session)
            if ours:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(p.name), sig)
        time.sleep(2)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
