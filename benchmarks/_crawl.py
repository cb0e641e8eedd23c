"""``raycrawl crawl`` run as a user runs it, against a served websim, for the live benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def crawl_cli(env: dict, web, out: Path, *extra: str, host_delay: float, ip_delay: float) -> dict:
    """``raycrawl crawl --out OUT`` over ``web`` (its hosts file, loopback allowed) with ``extra``
    flags; the report, or exit with the crawl's stderr."""
    cmd = [sys.executable, "-m", "raycrawl", "crawl", "--out", str(out), "--resolve", str(web.hosts_file),
           "--allow-networks", "127.0.0.0/8", "--host-delay", str(host_delay), "--ip-delay", str(ip_delay),
           "--json", *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"crawl failed: {' '.join(cmd)}")
    return json.loads(proc.stdout)
