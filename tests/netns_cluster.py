"""Machines that share nothing, on one host: a Ray cluster whose head and agent nodes each live in a
network namespace of their own (``ip netns``; the tests run as root), with their own address on a
bridge, their own directory and their own processes, started as ``ray_cluster.yaml`` starts VMs.

- **Network.** A bridge holds ``10.N.0.1/16`` (this process, moto's S3 server); the head is
  ``10.N.0.2``, agent nodes ``10.N.0.3`` on, websim ``10.N.0.250`` and serves on ``10.N.1.1`` on
  (``websim serve --net 10.N``). ``N`` is the first bridge number free on the machine, so parallel
  test workers never share a network. Nothing here reaches beyond the bridge.
- **Disks.** Every process of a node sees the node's own directory at the one path the crawl's
  ``--agent-dir`` names (a bind mount in a mount namespace of the node's own): agents on different
  nodes write the same path and never see each other's files, as on VMs.
- **Ray** as ray_cluster.yaml starts it: ``ray start --head --port=6380 --dashboard-host=0.0.0.0``
  and ``ray start --block --address=HEAD:6380 --resources={"agent": 1}``, token authentication on (the
  token in a file every node and ``ray job submit`` read, as the launcher ships it). The crawl is
  submitted with ``ray job submit`` and runs its driver on the head.
- **Redis** on the head with a password (``raycrawl.redis_daemon --bind 0.0.0.0
  --requirepass-file``), **S3** through moto's server mode.
- **Agent nodes** run ``ray start --block`` as their main process, as ray_cluster.yaml's systemd
  service does. **A node that shuts down** (a VM's shutdown, a spot VM reclaimed, a scale-down)
  gets what systemd sends that service: SIGTERM to that main process, SIGKILL to what is left
  once it ended or after the stop timeout (:meth:`Machine.shut_down`); or ``ray drain-node`` by
  hand first (:meth:`Machine.drain`).
- **Losing a node** is its cable cut (a lost VM answers nothing, not even a reset), SIGKILL to
  every process of its namespace, then its directory deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from s3_server import BUCKET, MotoS3

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
GCS_PORT, REDIS_PORT, DASHBOARD_PORT = 6380, 6379, 8265
WEB_HOST = 250  # websim's own address: 10.N.0.250


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)


def available() -> str | None:
    """Why this machine cannot run the harness (not root, no ``ip netns``), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "iproute2's ip and util-linux's unshare are needed"
    return None


class Machine:
    """One node: a network namespace, an address, a directory, the processes started in them."""

    def __init__(self, cluster: Machines, name: str, host: int) -> None:
        self.cluster, self.name = cluster, name
        self.ns = f"{cluster.tag}-{name}"
        self.ip = f"{cluster.net}.0.{host}"
        self.dir = cluster.base / name
        self.ray_dir = Path(f"/tmp/{cluster.tag}r/{name}")  # (AF_UNIX socket paths must stay short)
        self.veth = ""
        self.gone = False
        self.main: subprocess.Popen | None = None  # an agent node's ``ray start --block``

    def up(self, extra_ips: list[str] = ()) -> Machine:
        self.veth = veth = f"{self.cluster.tag}{self.name[:6]}"
        ip("netns", "add", self.ns)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        ip("link", "set", veth, "master", self.cluster.bridge, "up")
        for address in [self.ip, *extra_ips]:
            ip("-n", self.ns, "addr", "add", f"{address}/16", "dev", "eth0")
        ip("-n", self.ns, "link", "set", "eth0", "up")
        ip("-n", self.ns, "link", "set", "lo", "up")
        (self.dir / "agent-dir").mkdir(parents=True, exist_ok=True)
        return self

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run on this node: in its network namespace, with its directory at the shared
        agent-dir path (a mount namespace of its own, inherited by every process it starts)."""
        mount = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        return ["ip", "netns", "exec", self.ns, "unshare", "--mount", "--propagation", "private",
                "sh", "-c", mount, "sh", str(self.dir / "agent-dir"), str(self.cluster.agent_dir), *argv]

    def run(self, argv: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
        done = subprocess.run(self.argv(argv), env=self.cluster.env, capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: {' '.join(argv[:3])} failed:\n{done.stderr[-3000:]}")
        return done

    def popen(self, argv: list[str], log: str) -> subprocess.Popen:
        with open(self.dir / log, "ab") as out:
            return subprocess.Popen(self.argv(argv), env=self.cluster.env, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.dir)

    def pids(self) -> list[int]:
        done = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in done.stdout.split()]

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every process of the node; how many there were."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return len(pids)

    def wait_empty(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.pids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def lose(self, cut: bool = True) -> None:
        """The VM is gone: its cable cut (nothing answers, not even a reset: Ray sees it by missed
        heartbeats only, a minute later), every process killed at once, its disk with it.
        ``cut=False``: its address still answers with resets (a VM whose processes died)."""
        if cut:
            ip("link", "set", self.veth, "down")
        # Again until none is left: a process forked between the listing and the kill survives one.
        deadline = time.monotonic() + 30
        while self.signal(signal.SIGKILL):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: processes outlived SIGKILL for 30 s: {self.pids()}")
            time.sleep(0.05)
        shutil.rmtree(self.dir / "agent-dir", ignore_errors=True)
        self.gone = True

    def drain(self, deadline: float = 30) -> float:
        """A spot VM's preemption notice, as Ray's autoscaler answers it: ``ray drain-node`` for
        this node (its agent leaves, actors/cluster/membership.py), then, once no agent actor runs here or
        at the deadline, SIGTERM to every process (the VM shuts down). Seconds until the agent left."""
        t0 = time.monotonic()
        # (--node-id given: without it, Ray 2.60's drain-node starts a local Ray of its own and drains that)
        self.run(["ray", "drain-node", f"--address={self.cluster.head.ip}:{GCS_PORT}", f"--node-id={self.node_id()}",
                  "--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=spot preemption notice",
                  f"--deadline-remaining-seconds={int(deadline)}"])
        while self.has("ray::AgentActor") and time.monotonic() - t0 < deadline:
            time.sleep(0.2)
        took = time.monotonic() - t0
        self.signal(signal.SIGTERM)
        if not self.wait_empty(30):
            raise RuntimeError(f"{self.name}: processes outlived SIGTERM for 30 s: {self.pids()}")
        self.gone = True  # (the VM shut down)
        return took

    def shut_down(self, stop_timeout: float = 60, meanwhile: Callable[[], None] | None = None) -> float:
        """The VM shuts down (a spot VM reclaimed, a scale-down, ``systemctl stop``): systemd stops
        the node's service as ray_cluster.yaml defines it (``KillMode=mixed``): SIGTERM to its main
        process, ``ray start --block``, and SIGKILL to every process left once it ended or after
        ``stop_timeout``; then its disk is gone. ``meanwhile`` runs right after the SIGTERM.
        Seconds until the main process ended."""
        assert self.main is not None, f"{self.name} has no ray start --block"
        t0 = time.monotonic()
        self.main.send_signal(signal.SIGTERM)
        if meanwhile is not None:
            meanwhile()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.main.wait(stop_timeout)
        took = time.monotonic() - t0
        self.lose(cut=False)
        return took

    def node_id(self) -> str:
        """Ray's id of this node (its raylet's ``--node_id``)."""
        for pid in self.pids():
            with contextlib.suppress(OSError):
                for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    if arg.startswith(b"--node_id="):
                        return arg.split(b"=", 1)[1].decode()
        raise RuntimeError(f"{self.name}: no raylet")

    def has(self, name: str) -> bool:
        """A process of this node is called ``name`` (Ray names its workers ``ray::Class``)."""
        for pid in self.pids():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(name.encode()):
                    return True
        return False

    def down(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait_empty(30)
        if self.main is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.main.wait(5)
        # (the namespace may outlive its name a while: its cable is cut here, not left to the kernel)
        for argv in (("link", "del", self.veth), ("netns", "del", self.ns)):
            with contextlib.suppress(subprocess.CalledProcessError):
                ip(*argv)


class Machines:
    """A head and ``agents`` agent nodes (context manager), Redis on the head, S3 on the bridge."""

    def __init__(self, base: Path, agents: int = 2, agent_cpus: int = 1) -> None:
        self.base = Path(base)
        self.agent_cpus = agent_cpus
        self.n_agents = agents
        self.machines: dict[str, Machine] = {}
        self.bridge = ""
        self.s3: MotoS3 | None = None
        self.redis: subprocess.Popen | None = None

    # ------------------------------------------------------------------------------------ set-up
    def __enter__(self) -> Machines:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _claim_network(self) -> None:
        for n in range(100, 250):
            try:
                ip("link", "add", f"rcb{n}", "type", "bridge")
            except subprocess.CalledProcessError:
                continue  # another test worker's
            self.bridge, self.tag, self.net = f"rcb{n}", f"rc{n}", f"10.{n}"
            ip("addr", "add", f"{self.net}.0.1/16", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            return
        raise RuntimeError("no free bridge rcb100..rcb249")

    def start(self) -> Machines:
        self.base.mkdir(parents=True, exist_ok=True)
        self._claim_network()
        # The path --agent-dir names; each node mounts its own directory there.
        self.agent_dir = Path(f"/tmp/{self.tag}-agent")
        self.agent_dir.mkdir(exist_ok=True)
        token = self.base / "ray-token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        self.redis_pass = self.base / "redis.pass"
        self.redis_pass.write_text(secrets.token_urlsafe(24) + "\n")
        self.redis_pass.chmod(0o600)
        self.s3 = MotoS3(host=f"{self.net}.0.1").start()
        self.env = {**os.environ, **self.s3.env(), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
                    "PATH": f"{BIN}:{os.environ['PATH']}", "RAY_ADDRESS": ""}
        self.env.pop("RAY_ADDRESS")
        head = self._machine("head", 2)
        head.run(["ray", "start", "--head", f"--port={GCS_PORT}", "--dashboard-host=0.0.0.0",
                  f"--node-ip-address={head.ip}", "--num-cpus=0", "--disable-usage-stats",
                  f"--temp-dir={head.ray_dir}"])
        self.redis = head.popen([sys.executable, "-m", "raycrawl.redis_daemon", "--dir", str(head.dir / "redis"),
                                 "--port", str(REDIS_PORT), "--bind", "0.0.0.0",
                                 "--requirepass-file", str(self.redis_pass)], "redis.log")
        from concurrent.futures import ThreadPoolExecutor

        machines = [self._machine(f"agent{k}", 2 + k) for k in range(1, self.n_agents + 1)]
        with ThreadPoolExecutor(max(1, len(machines))) as pool:  # (each start takes seconds of waiting)
            list(pool.map(self._start_agent, machines))
        return self

    def _machine(self, name: str, host: int, extra_ips: list[str] = ()) -> Machine:
        m = Machine(self, name, host).up(extra_ips)
        self.machines[name] = m
        return m

    def add_agent(self) -> Machine:
        """A new agent node joins (``ray start --address``): its name is ``agentK``."""
        k = sum(name.startswith("agent") for name in self.machines) + 1
        return self._start_agent(self._machine(f"agent{k}", 2 + k))

    def _start_agent(self, m: Machine, timeout: float = 180) -> Machine:
        # As ray_cluster.yaml's service runs it: ``ray start --block`` is the node's main process.
        m.main = m.popen(["ray", "start", "--block", f"--address={self.head.ip}:{GCS_PORT}", f"--node-ip-address={m.ip}",
                          f"--num-cpus={self.agent_cpus}", '--resources={"agent": 1}', "--disable-usage-stats",
                          f"--temp-dir={m.ray_dir}"], "ray-start.log")
        deadline = time.monotonic() + timeout
        log = m.dir / "ray-start.log"
        while "block forever" not in log.read_text(errors="replace"):  # (printed once the node is up)
            if m.main.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{m.name}: ray start --block failed:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        return m

    def websim(self, out_dir: Path, **params):
        """A websim (raycrawl.websim.Websim) served from a node of its own, on ``10.N.1.1``..."""
        from raycrawl.websim import Websim
        from raycrawl.websim.model import ip_address

        web = self._machine("web", WEB_HOST, [ip_address(i, self.net) for i in range(params.get("ips", 5))])
        return Websim(out_dir=out_dir, net=self.net, wrap=["ip", "netns", "exec", web.ns], **params)

    @property
    def head(self) -> Machine:
        return self.machines["head"]

    def agents(self) -> list[Machine]:
        return [m for name, m in self.machines.items() if name.startswith("agent") and not m.gone]

    def close(self) -> None:
        for m in self.machines.values():
            m.down()
        if self.s3 is not None:
            self.s3.stop()
        if self.bridge:
            with contextlib.suppress(subprocess.CalledProcessError):
                ip("link", "del", self.bridge)
        if self.bridge:
            shutil.rmtree(self.agent_dir, ignore_errors=True)
            shutil.rmtree(f"/tmp/{self.tag}r", ignore_errors=True)

    # ------------------------------------------------------------------------------------ the crawl
    @property
    def redis_url(self) -> str:
        return f"redis://{self.head.ip}:{REDIS_PORT}/0"

    def redis_client(self):
        import redis

        return redis.Redis.from_url(self.redis_url, password=self.redis_pass.read_text().strip())

    def crawl_args(self, web, out_prefix: str) -> list[str]:
        """What a user of the cloud recipe gives ``raycrawl crawl`` (README, "Running on a
        cluster"): the head's Redis with its password file, agents on their own disks, the store."""
        return ["--address", "auto", "--elastic", "--seeds", str(web.seeds_file),
                "--out", str(self.head.dir / out_prefix), "--redis-url", self.redis_url,
                "--redis-password-file", str(self.redis_pass), "--agent-dir", str(self.agent_dir),
                "--out-store", f"s3://{BUCKET}/{out_prefix}", "--dns-server", "{}:{}".format(*web.dns_address),
                "--allow-networks", f"{self.net}.0.0/16"]

    def submit(self, crawl_args: list[str], log: Path) -> subprocess.Popen:
        """``ray job submit --working-dir . -- raycrawl crawl ARGS`` from outside the cluster (this
        process, on the bridge), as a user does; it returns when the job ends, its output in ``log``."""
        argv = ["ray", "job", "submit", "--address", f"http://{self.head.ip}:{DASHBOARD_PORT}",
                "--working-dir", ".", "--", "raycrawl", "crawl", *crawl_args]
        out = open(log, "wb")  # noqa: SIM115 - the child holds it
        return subprocess.Popen(argv, env=self.env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)

    def stop_job(self, job: subprocess.Popen, log: Path) -> None:
        """Stop a submitted job that outlived its test (``ray job stop``, then the client), so that
        it cannot run on beside the next test's crawl, on the same cluster and Redis."""
        import re

        found = re.search(r"raysubmit_\w+", log.read_text(errors="replace"))
        if found:
            subprocess.run(["ray", "job", "stop", "--address", f"http://{self.head.ip}:{DASHBOARD_PORT}", found.group()],
                           env=self.env, cwd=REPO, capture_output=True, timeout=120)
        job.kill()
        job.wait()

    def wait_dashboard(self, timeout: float = 120) -> None:
        """Until the head's job server answers (a fresh head's job agent takes seconds)."""
        import urllib.request

        deadline = time.monotonic() + timeout
        token = Path(self.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        while True:
            try:
                req = urllib.request.Request(f"http://{self.head.ip}:{DASHBOARD_PORT}/api/jobs/",
                                             headers={"Authorization": f"Bearer {token}"})
                with urllib.request.urlopen(req, timeout=5) as r:
                    json.loads(r.read())
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
