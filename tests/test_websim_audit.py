"""The request log and the audit: a polite scripted visit passes, each kind of rudeness is counted,
the CLI exits non-zero on violations and cleanly on bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import aiohttp
import pytest

from raycrawl.websim import Websim, audit, load_manifest, read_request_log
from raycrawl.websim.client import HostsResolver
from raycrawl.websim.request_log import LoggedRequest
from raycrawl.websim.visit import scripted_visit


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with Websim(hosts=40, ips=3, seed=3, out_dir=tmp_path_factory.mktemp("websim-audit")) as w:
        yield w


def since(web, t0: float) -> list[LoggedRequest]:
    return [r for r in web.requests() if r.start >= t0]


async def fetch_all(web, urls: list[str], pause: float = 0.0) -> list[tuple[int, int]]:
    out = []
    connector = aiohttp.TCPConnector(resolver=HostsResolver(web.hosts_file), limit=1)
    async with aiohttp.ClientSession(connector=connector) as s:
        for u in urls:
            async with s.get(u, allow_redirects=False) as r:
                out.append((r.status, len(await r.read())))
            await asyncio.sleep(pause)
    return out


def plain_host(m, pred=lambda rec: True) -> str:
    return next(h for h, rec in m.hosts.items() if rec["role"] == "plain" and rec["pages"] >= 6 and pred(rec))


async def test_polite_visit_passes_and_log_matches_what_the_client_saw(web):
    t0 = time.time()
    result = await scripted_visit(web.manifest, web.hosts_file, max_pages=30, host_delay=0.15, ip_delay=0.03)
    logged = since(web, t0)
    m = web.manifest
    assert len(result.fetched) >= 30 and result.errors == 0
    assert len(logged) == len(result.fetched)
    by_target = {(f"http://{r.host}{r.target}"): r for r in logged}
    for url, status, nbytes in result.fetched:
        rec = by_target[url]
        assert (rec.status, rec.bytes) == (status, nbytes)
        assert rec.ip == m.hosts[m.host_name(url)]["ip"]  # the address the client dialed
        assert rec.start <= rec.end
        if not url.endswith("/robots.txt"):
            assert status == m.pages[url]["status"]
    report = audit(logged, m, host_delay=0.15, ip_delay=0.03)
    assert report.ok, report.summary()
    assert report.robots_fetches == len({m.host_name(u) for u, _, _ in result.fetched})
    assert report.min_host_slack is not None and report.min_host_slack >= -0.002


async def test_back_to_back_requests_are_host_and_ip_violations(web):
    m = web.manifest
    host = plain_host(m, lambda rec: not rec["crawl_delay"] and rec["robots"] in ("missing", "allow_all"))
    urls = [p["url"] for p in m.pages.values() if p["host"] == host and p["kind"] == "html"][:5]
    t0 = time.time()
    await fetch_all(web, urls)
    report = audit(since(web, t0), m, host_delay=0.5, ip_delay=0.5)
    assert report.count("host") == len(urls) - 1
    assert report.count("ip") == len(urls) - 1
    assert report.count("robots") == report.count("duplicate") == 0
    # The same visit, judged with zero delays, is clean.
    assert audit(since(web, t0), m, host_delay=0.0, ip_delay=0.0).ok


async def test_ip_politeness_spans_hosts_sharing_an_address(web):
    m = web.manifest
    by_ip: dict[str, list[str]] = {}
    for h, rec in m.hosts.items():
        if rec["role"] == "plain" and not rec["crawl_delay"] and rec["robots"] in ("missing", "allow_all", "basic"):
            by_ip.setdefault(rec["ip"], []).append(h)
    hosts = next(hs for hs in by_ip.values() if len(hs) >= 3)[:3]
    t0 = time.time()
    await fetch_all(web, [f"http://{h}:{m.port}/" for h in hosts])
    report = audit(since(web, t0), m, host_delay=1.0, ip_delay=0.5)
    assert report.count("host") == 0 and report.count("ip") == 2


async def test_crawl_delay_robots_and_duplicate_violations(web):
    m = web.manifest
    delayed = next((h for h, rec in m.hosts.items() if rec["crawl_delay"] and rec["fault"] is None
                    and rec["robots"] != "agent_excluded"), None)
    t0 = time.time()
    if delayed is not None:
        d = m.hosts[delayed]["crawl_delay"]
        urls = [p["url"] for p in m.pages.values() if p["host"] == delayed and p["allowed"] and p["kind"] == "html"][:2]
        await fetch_all(web, urls, pause=d / 3)
        report = audit(since(web, t0), m, host_delay=0.01, ip_delay=0.0)
        assert report.count("host") == len(urls) - 1  # Crawl-delay beats the smaller --host-delay
    disallowed = [p for p in m.pages.values() if not p["allowed"] and m.hosts[p["host"]]["fault"] is None][:3]
    assert disallowed
    t1 = time.time()
    await fetch_all(web, [p["url"] for p in disallowed], pause=0.05)
    report = audit(since(web, t1), m, host_delay=0.0, ip_delay=0.0)
    assert report.count("robots") == len(disallowed)
    # A 5xx robots.txt disallows everything but robots.txt itself.
    err_host = next(h for h, rec in m.hosts.items() if rec["robots"] == "error_5xx")
    t2 = time.time()
    await fetch_all(web, [f"http://{err_host}:{m.port}/robots.txt", f"http://{err_host}:{m.port}/"])
    assert audit(since(web, t2), m, 0.0, 0.0).count("robots") == 1
    # Duplicates: the same page twice is one violation; a 5xx page retried is none.
    page = next(p for p in m.pages.values() if p["allowed"] and p["kind"] == "html" and m.hosts[p["host"]]["fault"] is None)
    err = next(p for p in m.pages.values() if p["kind"] == "error" and p["allowed"])
    t3 = time.time()
    await fetch_all(web, [page["url"], page["url"], err["url"], err["url"]])
    report = audit(since(web, t3), m, 0.0, 0.0)
    assert report.count("duplicate") == 1 and report.count("robots") == 0


async def test_a_host_on_both_schemes_is_one_host_and_each_scheme_needs_its_robots_txt(tmp_path):
    """websim --https: a host answers http and https (same bytes), about half the links to it are
    https ones; the audit counts its requests on both schemes against ONE host delay, and an https
    page fetched before the https robots.txt is a ``robots-first`` violation even after the http one."""
    with Websim(hosts=20, ips=2, seed=3, out_dir=tmp_path / "web", https_hosts=1) as web:
        m = web.manifest
        [host] = web.info["https_hosts"]
        assert m.tls_port == web.tls_port > 0 and m.hosts[host]["role"] == "plain"
        links = [u for p in m.pages.values() for u in p["links"] if m.host_name(u) == host]
        https = [u for u in links if u.startswith("https://")]
        assert https and 0.25 < len(https) / len(links) < 0.75, (len(https), len(links))
        page = next(p for p in m.pages.values() if p["host"] == host and p["kind"] == "html" and p["allowed"])
        twin = page["url"].replace(f"http://{host}:{m.port}/", f"https://{host}:{m.tls_port}/")
        assert m.pages[twin]["links"] == page["links"]  # the same page, the same links, on both schemes
        http_robots, https_robots = (f"http://{host}:{m.port}/robots.txt", f"https://{host}:{m.tls_port}/robots.txt")

        async def get(urls: list[str], pause: float) -> list[bytes]:
            connector = aiohttp.TCPConnector(resolver=HostsResolver(web.hosts_file), limit=1, ssl=False)
            bodies = []
            async with aiohttp.ClientSession(connector=connector) as s:
                for u in urls:
                    async with s.get(u, allow_redirects=False) as r:
                        bodies.append(await r.read())
                    await asyncio.sleep(pause)
            return bodies

        t0 = time.time()
        bodies = await get([http_robots, page["url"], twin], pause=0.0)
        assert bodies[1] == bodies[2]  # byte for byte the same page
        rude = audit(since(web, t0), m, host_delay=0.3, ip_delay=0.0)
        assert rude.count("host") == 2 and rude.hosts == 1, rude.summary()  # one host, two schemes
        assert [v.key for v in rude.violations if v.kind == "robots-first"] == [twin], rude.summary()
        t1 = time.time()
        await get([http_robots, page["url"], https_robots, twin], pause=0.35)
        polite = audit(since(web, t1), m, host_delay=0.3, ip_delay=0.0)
        assert polite.ok, polite.summary()


def rec(start, end, host, target="/", ip="127.0.1.1", status=200):
    return LoggedRequest(start, end, ip, host, target, status, 10)


def test_tolerance_boundary_on_constructed_logs(web):
    m = web.manifest
    host = plain_host(m, lambda r: not r["crawl_delay"] and r["robots"] in ("missing", "allow_all"))
    hh = f"{host}:{m.port}"
    pages = [p["url"].split(str(m.port), 1)[1] for p in m.pages.values() if p["host"] == host][:3]
    just_inside = [rec(0.0, 0.1, hh, pages[0]), rec(0.1 + 0.5 - 0.0019, 0.7, hh, pages[1])]
    just_outside = [rec(0.0, 0.1, hh, pages[0]), rec(0.1 + 0.5 - 0.0021, 0.7, hh, pages[1])]
    overlap = [rec(0.0, 1.0, hh, pages[0]), rec(0.5, 0.6, hh, pages[1]), rec(1.6, 1.7, hh, pages[2])]
    assert audit(just_inside, m, 0.5, 0.0).ok
    assert audit(just_outside, m, 0.5, 0.0).count("host") == 1
    assert audit(just_outside, m, 0.5, 0.0, tolerance=0.005).ok
    # Overlapping requests violate, and the next gap counts from the LATEST end seen.
    assert audit(overlap, m, 0.5, 0.0).count("host") == 1
    foreign = [rec(0, 1, "elsewhere.test"), rec(1, 2, "elsewhere.test")]
    report = audit(foreign, m, 10, 10)
    assert report.ok and report.foreign == 2


def test_log_flushed_on_stop_and_cli_audit(tmp_path):
    with Websim(hosts=12, ips=2, seed=5, out_dir=tmp_path) as w:
        urls = w.seeds()[:1] * 3
        asyncio.run(fetch_all(w, urls))
        log_path, manifest_path = w.request_log, w.manifest_path
    records = read_request_log(log_path)  # written at stop without an explicit flush
    assert [r.status for r in records] == [200, 200, 200]
    cmd = [sys.executable, "-m", "raycrawl", "websim", "audit", str(log_path), "--host-delay", "0.2", "--ip-delay", "0"]
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "duplicate fetches   2" in bad.stdout and "host politeness     2 violations" in bad.stdout
    good = subprocess.run(cmd[:6] + ["--host-delay", "0", "--ip-delay", "0", "--manifest", str(manifest_path)],
                          capture_output=True, text=True)
    assert good.returncode == 1  # duplicates remain whatever the delays
    assert load_manifest(manifest_path).seeds == w.seeds()


@pytest.mark.parametrize("case", ["missing-log", "not-a-log", "bad-manifest", "negative-delay"])
def test_cli_audit_bad_input_exits_2_without_traceback(tmp_path, case):
    log = tmp_path / "requests.log"
    manifest = tmp_path / "manifest.jsonl.gz"
    log.write_text("# websim request log v1\n")
    manifest.write_bytes(b"not gzip at all")
    args = [str(log), "--host-delay", "1", "--ip-delay", "1", "--manifest", str(manifest)]
    if case == "missing-log":
        args[0] = str(tmp_path / "nope.log")
    elif case == "not-a-log":
        log.write_text("hello\n")
    elif case == "negative-delay":
        args[2] = "-1"
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "websim", "audit", *args], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr


@pytest.mark.parametrize("args", [["--hosts", "0"], ["--ips", "70000"], ["--port", "99999"]])
def test_cli_serve_bad_arguments_exit_2(tmp_path, args):
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "websim", "serve", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_demo_stage_serves_visits_and_audits(tmp_path):
    from raycrawl.commands.websim import demo_stage

    crawl_dir = tmp_path / "crawl"
    first = demo_stage(crawl_dir)
    assert "scripted polite visit" in first and "verdict             OK" in first
    records = read_request_log(crawl_dir / "websim" / "requests.log")
    assert f"requests            {len(records)} " in first
    # Run again: now it audits the log it finds instead of serving.
    second = demo_stage(crawl_dir, host_delay=10.0)
    assert "audit of the crawl's request log" in second and "VIOLATIONS" in second


def test_cli_serve_prints_where_things_are_and_stops_on_ctrl_c(tmp_path):
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "raycrawl", "websim", "serve", "--hosts", "10", "--ips", "2",
                             "--seed", "2", "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C"):
            break
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    out = "".join(lines)
    port = int(out.split(", port ")[1].split()[0])
    assert load_manifest(tmp_path / "manifest.jsonl.gz").port == port
    for name in ("DNS server", "seeds", "hosts file", "manifest", "request log"):
        assert name in out
    assert (tmp_path / "hosts").read_text().count("\n") == 10
    assert read_request_log(tmp_path / "requests.log") == []


def test_cli_stats_and_json_audit(web, tmp_path):
    import json

    m = web.manifest
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "websim", "stats", str(web.manifest_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert f"URLs              {len(m.pages)} " in proc.stdout
    assert f"reachable         {len(m.reachable(False))} from the seeds, {len(m.reachable(True))} obeying" in proc.stdout
    web.flush_log()
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "websim", "audit", str(web.request_log), "--json",
                           "--host-delay", "0", "--ip-delay", "0"], capture_output=True, text=True)
    data = json.loads(proc.stdout)
    assert data["requests"] == len(read_request_log(web.request_log))
    assert proc.returncode == (0 if data["ok"] else 1)
    assert sum(data["violations"].values()) == len(data["list"])
    bad = subprocess.run([sys.executable, "-m", "raycrawl", "websim", "stats", str(tmp_path)], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
