"""websim — the in-vitro web: a deterministic synthetic web served on loopback, its DNS server,
its ground-truth manifest, its request log and the politeness/robots audit.

Typical use in a test::

    with Websim(hosts=50, ips=5, seed=1, out_dir=tmp_path) as web:
        crawl(web.seeds(), resolver=web.dns_address)
        report = web.audit(host_delay=0.5, ip_delay=0.1)

The server runs in a subprocess (``raycrawl websim serve``) so it never competes with the caller's
event loop or GIL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from raycrawl.websim.audit import AuditReport, audit
from raycrawl.websim.manifest import Manifest, load_manifest
from raycrawl.websim.request_log import LoggedRequest, read_request_log

__all__ = ["Websim", "Manifest", "load_manifest", "read_request_log", "LoggedRequest", "audit", "AuditReport"]


class Websim:
    """A running in-vitro web (context manager). Files land in ``out_dir``: ``manifest.jsonl.gz``,
    ``requests.log``, ``hosts``, ``seeds.txt``, ``websim.json``."""

    def __init__(self, hosts: int = 50, ips: int = 5, seed: int = 1, epoch: int = 0, out_dir: str | Path = "websim-out",
                 pages_per_host_mean: float = 25.0, port: int = 0, slow_delay: float | None = None,
                 prerender: bool = False, start_timeout: float = 120.0, clean: bool = False,
                 change_rates: bool = False, https_hosts: int = 0, requisites: bool = False,
                 net: str = "127.0", wrap: list[str] = (), scripts: bool = False, loaded_hosts: int = 0,
                 members_hosts: int = 0, real_pages: str | Path | None = None) -> None:
        """``https_hosts``: that many popular hosts answer https too (websim.server); ``requisites``:
        pages need images, stylesheets, scripts and a font (WebModel._add_requisites); ``scripts``: a
        JavaScript web (WebModel._add_scripts); ``loaded_hosts``: that many hosts answer more slowly
        the more they are asked (websim.server.LOADED_BASE; ``info["loaded"]`` names them);
        ``members_hosts``: that many hosts need a form login (websim/members.py; ``info["members"]``);
        ``real_pages``: a directory of real pages served beside the web (``--real-pages``); ``net``: the
        /16 it serves on (``--net``); ``wrap``: a command the server runs under (``ip netns exec
        NAME``, which execs it: the process stays the server's)."""
        self.params = {"hosts": hosts, "ips": ips, "seed": seed, "epoch": epoch,
                       "pages_per_host_mean": pages_per_host_mean, "port": port, "slow_delay": slow_delay,
                       "prerender": prerender, "clean": clean, "change_rates": change_rates,
                       "https_hosts": https_hosts, "requisites": requisites, "net": net, "scripts": scripts,
                       "loaded_hosts": loaded_hosts, "members_hosts": members_hosts,
                       "real_pages": str(real_pages) if real_pages is not None else None}
        self.wrap = list(wrap)
        self.out_dir = Path(out_dir)
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen | None = None
        self._info: dict | None = None
        self._manifest: Manifest | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Websim:
        """Start the server subprocess and wait until it serves (files written, sockets bound)."""
        assert self._proc is None, "already started"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        ready = self.out_dir / "ready.json"
        ready.unlink(missing_ok=True)
        p = self.params
        # -P: the working directory is not put on the path (a checkout's folders never shadow the package)
        cmd = [*self.wrap, sys.executable, "-P", "-m", "raycrawl", "websim", "serve", "--net", p["net"], "--hosts", str(p["hosts"]), "--ips", str(p["ips"]),
               "--seed", str(p["seed"]), "--epoch", str(p["epoch"]), "--pages-per-host-mean",
               str(p["pages_per_host_mean"]), "--port", str(p["port"]), "--out", str(self.out_dir),
               "--ready-file", str(ready), "--quiet"]
        if p["prerender"]:
            cmd.append("--prerender")
        if p["clean"]:
            cmd.append("--clean")
        if p["change_rates"]:
            cmd.append("--change-rates")
        if p["requisites"]:
            cmd.append("--requisites")
        if p["scripts"]:
            cmd.append("--scripts")
        if p["https_hosts"]:
            cmd += ["--https", str(p["https_hosts"])]
        if p["slow_delay"] is not None:
            cmd += ["--slow-delay", str(p["slow_delay"])]
        if p["loaded_hosts"]:
            cmd += ["--loaded", str(p["loaded_hosts"])]
        if p["members_hosts"]:
            cmd += ["--members", str(p["members_hosts"])]
        if p["real_pages"]:
            cmd += ["--real-pages", str(Path(p["real_pages"]).resolve())]
        self._stderr = open(self.out_dir / "websim.stderr", "wb")  # noqa: SIM115 - lives as long as the process
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + self.start_timeout
        while not ready.exists():
            if self._proc.poll() is not None:
                err = (self.out_dir / "websim.stderr").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"websim exited with {self._proc.returncode}: {err}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("websim did not start in time")
            time.sleep(0.02)
        self._info = json.loads(ready.read_text())
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (SIGTERM: the request log is flushed) and wait for it."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()
        self._proc = None

    def __enter__(self) -> Websim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """Process id of the server (for CPU accounting in benchmarks)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def flush_log(self, settle: float = 0.2) -> None:
        """Ask the server to append its buffered request-log lines now (SIGUSR1)."""
        if self.running:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGUSR1)
            time.sleep(settle)

    # ------------------------------------------------------------------ what callers use
    @property
    def info(self) -> dict:
        assert self._info is not None, "websim not started"
        return self._info

    @property
    def port(self) -> int:
        return self.info["port"]

    @property
    def tls_port(self) -> int:
        """The port the ``https_hosts`` answer https on (0: none)."""
        return self.info.get("tls_port", 0)

    def scheme_of(self, host_header: str) -> str:
        """The scheme a request of the request log came in with (:meth:`Manifest.scheme_of`)."""
        return self.manifest.scheme_of(host_header)

    @property
    def ips(self) -> list[str]:
        return self.info["ips"]

    @property
    def dns_address(self) -> tuple[str, int]:
        ip, port = self.info["dns"]
        return ip, port

    @property
    def hosts_file(self) -> Path:
        return Path(self.info["hosts_file"])

    @property
    def request_log(self) -> Path:
        return Path(self.info["request_log"])

    @property
    def manifest_path(self) -> Path:
        return Path(self.info["manifest"])

    @property
    def seeds_file(self) -> Path:
        return Path(self.info["seeds"])

    @property
    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = load_manifest(self.manifest_path)
        return self._manifest

    def seeds(self) -> list[str]:
        """Seed URLs (home pages of the most popular hosts)."""
        return list(self.info["seed_urls"])

    def requests(self) -> list[LoggedRequest]:
        """The request log so far (flushed first if the server runs)."""
        self.flush_log()
        return read_request_log(self.request_log)

    def audit(self, host_delay: float, ip_delay: float, tolerance: float = 0.002) -> AuditReport:
        return audit(self.requests(), self.manifest, host_delay, ip_delay, tolerance)
