"""Adaptive politeness (policies/adaptive_delay.py): the rule, and a crawl of a websim host whose
response time rises with the load the crawl puts on it, judged from websim's own request log."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from raycrawl.exchange import FetchResult
from raycrawl.policies.adaptive_delay import AdaptiveDelays

ROOT = Path(__file__).resolve().parents[1]


def answer(seconds: float, status: int = 200, error: str | None = None) -> FetchResult:
    return FetchResult(url="http://h.test/", ip="127.0.0.1", status=status, started=100.0, ended=100.0 + seconds,
                       error=error)


def test_the_delay_follows_the_response_time_up_at_once_and_down_by_halves() -> None:
    a = AdaptiveDelays(factor=3.0, cap=20.0, base=0.5)
    assert a.after("h", answer(0.1)) == pytest.approx(0.3)  # below the configured delay: not kept
    assert "h" not in a.delays
    assert a.after("h", answer(1.0)) == pytest.approx(3.0)  # slower: at once
    assert a.after("h", answer(0.2)) == pytest.approx((3.0 + 0.6) / 2)  # faster: halfway
    assert a.after("h", answer(0.2)) == pytest.approx((1.8 + 0.6) / 2)
    assert a.after("h", answer(0.01, status=404)) == pytest.approx(1.2)  # a short error page lowers nothing
    assert a.after("h", answer(30.0)) == 20.0  # capped
    assert a.after("other", answer(0.05)) == pytest.approx(0.15) and "other" not in a.delays


def test_overload_doubles_the_delay() -> None:
    a = AdaptiveDelays(factor=2.0, cap=60.0, base=1.0)
    assert a.after("h", answer(0.01, status=503)) == 2.0  # at least twice the configured delay
    assert a.after("h", answer(0.01, status=429)) == 4.0
    assert a.after("h", answer(10.0, error="timeout", status=0)) == 20.0  # a timeout's own duration, if more
    assert a.after("h", answer(0.01)) == pytest.approx(10.01)  # then halfway down


def test_off_unmeasured_and_bounded() -> None:
    assert AdaptiveDelays(factor=0.0, cap=60.0, base=1.0).after("h", answer(5.0)) == 0.0
    a = AdaptiveDelays(factor=2.0, cap=60.0, base=1.0, size=3)
    assert a.after("h", FetchResult(url="http://h.test/", ip="127.0.0.1", error="connect")) == 0.0  # never sent
    for i in range(5):
        a.after(f"h{i}", answer(1.0))
    assert list(a.delays) == ["h2", "h3", "h4"]  # the hosts slowed last


FACTOR = 3.0


@pytest.mark.slow
def test_a_host_slowed_by_load_is_asked_as_the_factor_says(tmp_path) -> None:
    """A websim host answers in 20 ms per request it got in the last 2 s: at a 20 ms host delay the
    crawl would load it more and more. With ``delay_factor`` 3, websim's log shows every request to
    it begin at least 3× the previous response's duration after that response ended (a server-side
    gap is never shorter than the crawler's, nor a server-side duration longer), and every page of
    the host fetched."""
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.websim import Websim

    with Websim(hosts=4, ips=2, seed=3, clean=True, pages_per_host_mean=30, loaded_hosts=1,
                out_dir=tmp_path / "web") as web:
        proc = subprocess.run(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(tmp_path / "out"),
             "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
             "--host-delay", "0.02", "--ip-delay", "0", "-s", f"delay_factor={FACTOR}"],
            capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        web.flush_log()
        (loaded,) = web.info["loaded"]
        asked = sorted((r for r in web.requests() if r.host.rsplit(":", 1)[0] == loaded), key=lambda r: r.start)
        manifest = web.manifest
    pages = [r for r in asked if r.target != "/robots.txt"]
    assert len(pages) >= 15, len(pages)
    fetched = {r.url for r in iter_link_records(tmp_path / "out") if r.url.split("/")[2].split(":")[0] == loaded}
    assert len(fetched) == manifest.hosts[loaded]["pages"], (len(fetched), manifest.hosts[loaded]["pages"])
    slowed = 0
    for before, after in pairwise(asked):
        if before.target == "/robots.txt":  # (the rule follows page responses)
            continue
        wanted = FACTOR * (before.end - before.start)
        assert after.start - before.end >= wanted - 0.002, (before, after)
        slowed += wanted > 0.02 + 0.002
    assert slowed >= 5, "the load never made the factor matter: the test proved nothing"
