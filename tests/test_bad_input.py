"""Bad input over the commands gets one line and exit 2 — no traceback, no hang, nothing half-made,
and no nonsense accepted (issue 20's list of cases that once gave a traceback or were accepted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raycrawl.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)) * 12)
    (tmp_path / "garbage.txt").write_text("garbage\n")
    (tmp_path / "seeds.txt").write_text("http://a.test/\n")
    (tmp_path / "hosts.bad").write_text("not a hosts line\n")
    crawl = tmp_path / "crawl"  # a crawl directory whose files are all damaged
    (crawl / "warc").mkdir(parents=True)
    (crawl / "links").mkdir()
    (crawl / "warc" / "agent0-00000.warc.gz").write_bytes(bytes(range(256)) * 12)
    (crawl / "links" / "agent0-00000.rec.gz").write_bytes(bytes(range(256)) * 12)
    return tmp_path


CASES = [
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/garbage.txt/sub"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out1", "--resolve", "{d}/hosts.bad"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out2", "--address", "127.0.0.1:1"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out3", "--max-pages", "-1"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out4", "--ip-delay", "inf"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out5", "--host-delay", "nan"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out6", "--render", "(unclosed"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out7", "--render", "auto", "-s", "page_requisites=off"],
    ["crawl", "--seeds", "{d}/seeds.txt", "--out", "{d}/out8", "--render", "always", "--chromium", "{d}/garbage.txt"],
    ["status", "--redis-url", "bogus"],
    ["graph", "import", "--arcs", "{d}/bin.dat", "--out", "{d}/gi"],
    ["graph", "build", "{d}/crawl"],
    ["dedup", "{d}/crawl"],
    ["dedup", "{d}/crawl", "--out", "{d}/garbage.txt"],
    ["spam", "score", "{d}/crawl", "--model", "{d}/garbage.txt"],
    ["spam", "score", "{d}/crawl", "--model", "{d}/bin.dat"],
    ["rank", "{d}/crawl", "--hits", "-1"],
    ["serve", "{d}/crawl", "--port", "-1"],
    ["serve", "{d}/crawl", "--port", "70000"],
    ["serve", "{d}/crawl", "--host", "127.0.0.1", "--port", "{busy}"],
    ["serve", "{d}/crawl", "--host", "0.0.0.0", "--port", "0"],  # off loopback without --token-file
    ["index", "build", "{d}/crawl", "-w", "1", "-b", "1000"],
    ["websim", "serve", "--slow-delay", "-1", "--out", "{d}/ws"],
    ["websim", "serve", "--real-pages", "{d}/nothing", "--out", "{d}/ws"],
    ["check", "{d}/nothing"],
    ["check", "{d}/garbage.txt"],
    ["check", "{d}/crawl"],  # WARC and link files, but no crawl (no crawl-id, no Redis data)
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[:3]) for c in CASES])
def test_one_line_exit_2(files: Path, argv: list[str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = [a.format(d=files, busy=busy.getsockname()[1]) for a in argv]
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "raycrawl", *args], capture_output=True, text=True, timeout=120,
                              cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    # one error line, last; before it at most the warnings naming damaged files
    lines = proc.stderr.strip().splitlines()
    assert "error:" in lines[-1] and sum("error:" in line for line in lines) == 1, proc.stderr[-2000:]
    assert all(" WARNING " in line for line in lines[:-1]), proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60  # no retrying for minutes
    # nothing half-made: a refused crawl leaves no directory behind (the file blocker aside)
    for name in ("out1", "out2", "out3", "out4", "out5", "out6", "out7", "out8"):
        assert not (files / name).exists(), name


def test_truth_file_that_is_binary(files: Path) -> None:
    from types import SimpleNamespace

    from raycrawl.tasks.simulate import read_labels

    with pytest.raises(UserError, match="not a UTF-8"):
        read_labels(files / "bin.dat", SimpleNamespace(num_nodes=0))
