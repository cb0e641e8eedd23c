"""End-to-end crawls: `raycrawl crawl` against a small web served over loopback, audited from the
server's own request log (politeness, robots, each URL once), and kill -9 + --resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from aiohttp import web
from fault_crawl import SLOW_DELAY

from raycrawl.storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
HOSTS = {f"h{i}.test": f"127.0.0.{2 + i // 2}" for i in range(6)}  # 6 hosts on 3 IPs
ROBOTS = {"h2.test": "User-agent: *\nDisallow: /p3\nCrawl-delay: 0.4\n"}
TRAP_HOST = "h1.test"
# Page requisites (core/requisites.py): what h3's home page and its stylesheets need to be shown,
# one on another host; (host, path) → (media type, the url()s or bytes it serves).
REQUISITES = {("h3.test", "/site.css"): ("text/css", ["/base.css", "/bg.png"]),
              ("h3.test", "/base.css"): ("text/css", ["/font.woff"]),
              ("h3.test", "/bg.png"): ("image/png", b"\x89PNG\r\n\x1a\nbackground"),
              ("h3.test", "/font.woff"): ("font/woff", b"wOFFfont"),
              ("h4.test", "/logo.png"): ("image/png", b"\x89PNG\r\n\x1a\nlogo")}
HOME_REQUISITES = ["/site.css", "http://h4.test:{port}/logo.png"]  # of h3.test's "/"


def page_links(host: str, path: str) -> list[str] | None:
    """The site model: out-links of a page (paths or absolute URLs), None = 404."""
    i = int(host[1])
    if path == "/":
        others = [f"http://h{(i + d) % 6}.test:{{port}}/" for d in (1, 2)]
        extra = ["/cal/0"] if host == TRAP_HOST else []
        return ["/p1", "/p2", "/dup", "/old", "/missing", *others, *extra]
    if path.startswith("/p") and path[2:].isdigit():
        k = int(path[2:])
        return [f"/p{k + 1}"] if k < 5 else ["/"]
    if path == "/dup":
        return ["/p5"]
    if host == TRAP_HOST and path.startswith("/cal/"):
        return [f"/cal/{int(path[5:]) + 1}"]
    return None


class MiniWeb:
    """Six hosts on three loopback IPs, one port; logs every request with start and end times."""

    def __init__(self, tmp: Path) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
            self.port = s.getsockname()[1]
        self.log: list[dict] = []
        self.hosts_file = tmp / "hosts"
        self.hosts_file.write_text("".join(f"{ip} {h}\n" for h, ip in HOSTS.items()))
        self.seeds = tmp / "seeds.txt"
        self.seeds.write_text(f"http://h0.test:{self.port}/\n# a comment\n\n")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def handle(self, request: web.Request) -> web.Response:
        start = time.time()
        host = request.host.split(":")[0]
        path = request.path_qs
        ip = request.transport.get_extra_info("sockname")[0]
        status, body, headers = 200, "", {}
        if path == "/robots.txt":
            body = ROBOTS.get(host, "")
            status = 200 if host in ROBOTS else 404
            ctype = "text/plain"
        elif path == "/old":
            status, headers, ctype = 301, {"Location": "/p1"}, "text/html"
        elif (host, path) in REQUISITES:
            ctype, content = REQUISITES[host, path]
            body = "".join(f"@import '{u}';" if u.endswith(".css") else f"x {{ background: url({u}) }}"
                           for u in content) if ctype == "text/css" else content
        else:
            links = page_links(host, path)
            ctype = "text/html"
            if links is None:
                status, body = 404, "<html><body>not here</body></html>"
            elif path == "/dup":
                body = "<html><head><title>Same</title></head><body><p>the very same words on every host" \
                       "</p>" + "".join(f'<a href="{u}">x</a>' for u in links) + "</body></html>"
            else:
                head = "".join(f'<link rel=stylesheet href="{u}">' if u.endswith(".css") else f'<img src="{u.format(port=self.port)}">'
                               for u in (HOME_REQUISITES if (host, path) == ("h3.test", "/") else ()))
                body = (f"<html><head><title>{host}{path}</title>{head}</head><body><p>page {path} of {host} "
                        f"{'words ' * (len(path) + int(host[1]) * 7)}</p>"
                        + "".join(f'<a href="{u.format(port=self.port)}">link</a>' for u in links)
                        + "</body></html>")
        resp = (web.Response(status=status, body=body, content_type=ctype, headers=headers) if isinstance(body, bytes)
                else web.Response(status=status, text=body, content_type=ctype, headers=headers))
        await resp.prepare(request)
        # Stamped before the body goes out, as websim does (websim/server.py): stamped after, it
        # lands late when this thread is descheduled right after the send while the crawler already
        # has its answer, and the audit sees politeness gaps that were not there (two runs under load
        # showed a host and an IP gap both ~20 ms short after the same response). Bodies are small.
        end = time.time()
        await resp.write_eof()
        self.log.append({"host": host, "ip": ip, "path": path, "start": start, "end": end,
                         "status": status, "ua": request.headers.get("User-Agent", "")})
        return resp

    def __enter__(self) -> MiniWeb:
        self.thread.start()
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)

        async def start():
            self.runner = web.AppRunner(app, access_log=None)
            await self.runner.setup()
            for ip in sorted(set(HOSTS.values())):
                await web.TCPSite(self.runner, ip, self.port).start()

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def reachable(port: int) -> set[str]:
    """Independent BFS over the site model (robots obeyed, the trap and /dup's links excluded)."""

    seen, todo = set(), [f"http://h0.test:{port}/"]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        parts = urlsplit(url)
        host, path = parts.hostname, parts.path
        if path == "/old":
            todo.append(urljoin(url, "/p1"))
            continue
        if path == "/dup":
            continue  # only the first /dup fetched is followed: do not count on any
        for link in page_links(host, path) or []:
            target = urljoin(url, link.format(port=port))
            t = urlsplit(target)
            if t.path.startswith("/cal/") or (t.hostname == "h2.test" and t.path.startswith("/p3")):
                continue
            todo.append(target)
    return seen


DETAILS: list[tuple] = []  # the violations the last audits found, for failure messages


def audit(log: list[dict], host_delay: float, ip_delay: float) -> dict[str, int]:
    """Politeness as the server saw it: gaps from the end of a response to the next request start."""
    violations = {"host": 0, "ip": 0, "robots": 0, "twice": 0}
    by_host, by_ip = defaultdict(list), defaultdict(list)
    for r in log:
        by_host[r["host"]].append(r)
        by_ip[r["ip"]].append(r)
    for host, rs in by_host.items():
        rs.sort(key=lambda r: r["start"])
        delay = max(host_delay, 0.4) if host in ROBOTS else host_delay
        for a, b in zip(rs, rs[1:], strict=False):
            if b["start"] - a["end"] < delay - 0.002:
                violations["host"] += 1
                DETAILS.append(("host", host, a["path"], b["path"], round(b["start"] - a["end"], 4), delay))
        paths = [r["path"] for r in rs]
        violations["twice"] += len(paths) - len(set(paths))
        if paths and paths[0] != "/robots.txt":
            violations["robots"] += 1
    for rs in by_ip.values():
        rs.sort(key=lambda r: r["start"])
        for a, b in zip(rs, rs[1:], strict=False):
            if b["start"] - a["end"] < ip_delay - 0.002:
                violations["ip"] += 1
                DETAILS.append(("ip", a["ip"], a["host"] + a["path"], b["host"] + b["path"], round(b["start"] - a["end"], 4)))
    violations["robots"] += sum(1 for r in log if r["host"] == "h2.test" and r["path"].startswith("/p3"))
    return violations


def crawl_cmd(web: MiniWeb, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds), "--out", str(out),
            "--resolve", str(web.hosts_file), "--allow-networks", "127.0.0.0/8", "--host-delay", "0.2",
            "--ip-delay", "0.05", "--max-urls-per-host", "30", *extra]


def crawl_until(web: MiniWeb, out: Path, pages: int, *extra: str, ray: str | None = None) -> subprocess.Popen:
    """Start `raycrawl crawl` (in a process group of its own) and return once the server has
    answered ``pages`` page requests (since it started, not this run); ``ray`` as for :func:`run`."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), **({"RAY_ADDRESS": ray} if ray else {})}
    proc = subprocess.Popen(crawl_cmd(web, out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT, start_new_session=True)
    deadline = time.time() + 120
    while (served := len([r for r in web.log if r["path"] != "/robots.txt"])) < pages:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        if time.time() > deadline:  # (a signal sent now would not be sent mid-crawl, as the test means)
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{served} of {pages} pages served in 120 s: {proc.communicate()[1].decode()[-2000:]}")
        time.sleep(0.05)
    return proc


def stopped_crawl_state(out: Path) -> tuple[set[str], int]:
    """(URLs in flight, pages counted) as a stopped crawl's Redis (its AOF in OUT/redis) holds them."""
    import redis

    from raycrawl.redis_server import EmbeddedRedis

    server = EmbeddedRedis(out / "redis").start()
    client = redis.Redis.from_url(server.url)
    try:
        from raycrawl.actors.frontier.workbench import inflight_url

        keys = client.hkeys("rc:inflight")
        return {inflight_url(k.decode()) for k in keys}, int(client.hget("rc:stats", "pages") or 0)
    finally:
        client.close()
        server.stop()


def run(cmd: list[str], timeout: float = 240, cwd: Path = ROOT, ray: str | None = None) -> subprocess.CompletedProcess:
    """``ray``: the address of a cluster to join (the session's, for a resume in an ``own_ray`` test:
    what the test kills is the first run's Ray, the resume needs none of its own)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), **({"RAY_ADDRESS": ray} if ray else {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def _parser_actors(ray) -> int:
    return sum(a["ActorClassName"] == "CrewWorker" for a in ray._private.state.actors().values())


@pytest.mark.slow
def test_crawl_end_to_end(tmp_path: Path, ray_local) -> None:
    out = tmp_path / "crawl"
    parsers = _parser_actors(ray_local)
    with MiniWeb(tmp_path) as w:
        proc = run(crawl_cmd(w, out, "--json"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        log = list(w.log)
        port = w.port
    # The crawl joined the session's cluster through $RAY_ADDRESS (tests/conftest.py), as Ray's own
    # tools do (core/ray_start.py): that cluster's GCS lists its actors.
    assert _parser_actors(ray_local) > parsers
    report = json.loads((out / "report.json").read_text())
    assert report["stopped"] == "frontier empty"
    assert audit(log, 0.2, 0.05) == {"host": 0, "ip": 0, "robots": 0, "twice": 0}, DETAILS
    fetched = {f"http://{r['host']}:{port}{r['path']}" for r in log if r["path"] != "/robots.txt"}
    expected = reachable(port)
    assert expected <= fetched, sorted(expected - fetched)
    trap = [u for u in fetched if "/cal/" in u]
    assert 0 < len(trap) <= 30
    records = list(iter_link_records(out))
    denied = [r.url for r in records if r.error == "robots"]
    assert denied == [f"http://h2.test:{port}/p3"] and report["errors"]["robots"] == 1
    # every fetched URL has one record (robots.txt has none), plus the robots-denied one
    assert len(records) == report["pages"] == len(fetched) + 1
    assert {r.url for r in records} == fetched | set(denied)
    by_url = {r.url: r for r in records}
    assert by_url[f"http://h3.test:{port}/old"].redirect == f"http://h3.test:{port}/p1"
    # page requisites: h3's home page's, its stylesheet's @import and url()s, one on another host —
    # fetched, recorded as embeds (not links), and not pages
    requisites = {f"http://{h}:{port}{p}" for h, p in REQUISITES}
    assert requisites <= fetched, sorted(requisites - fetched)
    home = by_url[f"http://h3.test:{port}/"]
    assert home.embeds == [f"http://h3.test:{port}/site.css", f"http://h4.test:{port}/logo.png"]
    assert not set(home.links) & requisites
    assert by_url[f"http://h3.test:{port}/site.css"].embeds == [f"http://h3.test:{port}/base.css",
                                                                f"http://h3.test:{port}/bg.png"]
    from raycrawl.storage.crawl_pages import is_page_record

    assert not any(is_page_record(by_url[u]) for u in requisites)
    assert all(by_url[u].status == 200 for u in requisites)
    assert report["by_status"]["404"] == sum(1 for r in log if r["status"] == 404 and r["path"] != "/robots.txt")
    dups = [r for r in records if r.dup_kind == "exact"]
    assert len(dups) == sum(1 for u in fetched if u.endswith("/dup")) - 1  # all but the first
    assert all(r.links == [] for r in dups)
    assert report["duplicates"]["exact"] == len(dups)
    assert list((out / "warc").glob("*.warc.gz"))
    assert report["filtered"].get("max-urls-per-host", 0) > 0
    # `raycrawl status` reopens the stopped crawl's Redis data and agrees with the report
    st = run([sys.executable, "-m", "raycrawl", "status", "--out", str(out), "--json", "--hosts", "1000"], timeout=60)
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["stats"]["pages"] == report["pages"] and status["frontier"]["queued"] == 0
    assert status["running"] is False
    # its per-status and per-host breakdowns agree with the server's log (each URL's last answer)
    last = {(r["host"], r["path"]): r["status"] for r in log if r["path"] != "/robots.txt"}
    served = Counter(str(code) for code in last.values())
    assert {k: v for k, v in status["by_status"].items() if k != "0"} == dict(served)
    per_host = Counter(host for host, _ in last) + Counter(["h2.test"])  # + the robots-denied URL
    assert {r["host"]: r["done"] for r in status["hosts"]} == dict(per_host)  # by server name
    assert [r["done"] for r in status["hosts"]] == sorted(per_host.values(), reverse=True)
    assert all(r["queued"] == r["in_flight"] == 0 for r in status["hosts"])
    check_crawl_log(out, records, port, log)
    # the timeline: samples up to the end of the run, drawn in crawl-timeline.png
    from png_check import assert_picture

    from raycrawl.storage import crawl_timeline

    samples = crawl_timeline.read(out / "timeline")
    assert len(samples) >= 2 and samples[-1][1] == report["pages"], samples[-3:]
    assert_picture(out / "crawl-timeline.png")


def check_crawl_log(out: Path, records: list[dict], port: int, server_log: list[dict]) -> None:
    """OUT/crawl.log has one Heritrix line per link record, with its facts; each ``via`` really links
    to (or redirects to) the URL in the site model, and only the seed has none; the fetch start and
    duration enclose the server's receipt of the request (its log); `raycrawl log --format
    parquet|tsv` give the same rows."""
    from datetime import UTC, datetime

    received = defaultdict(list)
    for r in server_log:
        received[f"http://{r['host']}:{port}{r['path']}"].append(r["start"])
    import pyarrow.parquet as pq

    by_url = {r.url: r for r in records}
    lines = (out / "crawl.log").read_text().splitlines()
    assert len(lines) == len(records)
    seen = set()
    for line in lines:
        f = line.split()
        assert len(f) == 13, line
        rec = by_url[f[3]]
        seen.add(f[3])
        extra = json.loads(f[12])
        assert int(f[1]) == (rec.status or {"robots": -9998}.get(rec.error)) and int(f[2]) == rec.size
        assert f[6] == (rec.ctype or "-") and f[9] == (rec.sha1 or "-")
        assert [extra.get("warcFilename"), extra.get("warcFileOffset")] == list(rec.warc or (None, None))
        assert extra.get("duplicateOf") == rec.dup_of
        start, _, ms = f[8].partition("+")
        if rec.error == "robots":  # never requested
            assert ms == "-" and not received[f[3]], line
        else:
            begun = datetime.strptime(start, "%Y%m%d%H%M%S%f").replace(tzinfo=UTC).timestamp()
            ended = begun + int(ms) / 1000
            assert any(begun - 0.002 <= t <= ended + 0.002 for t in received[f[3]]), (line, received[f[3]])
        if f[5] == "-":
            assert f[3] == f"http://h0.test:{port}/" and f[4] == "-"
            continue
        via = urlsplit(f[5])
        targets = {urljoin(f[5], t.format(port=port)) for t in page_links(via.hostname, via.path) or ()}
        model = REQUISITES.get((via.hostname, via.path), ("", []))[1]
        embeds = {urljoin(f[5], t.format(port=port)) for t in
                  (HOME_REQUISITES if (via.hostname, via.path) == ("h3.test", "/") else model if isinstance(model, list) else [])}
        assert f[3] in targets | embeds | {by_url[f[5]].redirect}, (f[3], f[5])
        hop = "R" if f[3] == by_url[f[5]].redirect else "E" if f[3] in embeds and f[3] not in targets else "L"
        assert set(f[4]) <= {"L", "R", "E"} and f[4].endswith(hop), (f[3], f[4])
    assert seen == set(by_url)
    r = run([sys.executable, "-m", "raycrawl", "log", str(out), "--format", "parquet"], timeout=60)
    assert r.returncode == 0, r.stderr
    table = {row["url"]: row for row in pq.read_table(out / "crawl-log.parquet").to_pylist()}
    assert set(table) == set(by_url)
    for url, rec in by_url.items():
        row = table[url]
        assert (row["http_status"], row["size"], row["digest"], row["duplicate_of"], row["error"]) == (
            rec.status, rec.size, rec.sha1, rec.dup_of, rec.error)
        assert [row["warc_filename"], row["warc_offset"]] == list(rec.warc or (None, None))
    r = run([sys.executable, "-m", "raycrawl", "log", str(out), "--format", "tsv"], timeout=60)
    tsv = r.stdout.splitlines()
    assert tsv[0].split("\t")[:4] == ["time", "status", "size", "url"] and len(tsv) == len(records) + 1


def test_crawl_user_errors(tmp_path: Path, capsys) -> None:
    """Bad input: one clear line on stderr, exit 2, nothing started (run through the real CLI)."""
    from raycrawl.cli import main

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("ftp://nope\n")
    good = tmp_path / "good.txt"
    good.write_text("http://a.test/\n")
    bad_config = tmp_path / "c.toml"
    bad_config.write_text("host_delay = 1\nno_such_setting = 3\n")
    o = str(tmp_path / "o")
    cases = [
        ["--out", o],  # no seeds
        ["--seeds", str(tmp_path / "missing.txt"), "--out", o],
        ["--seeds", str(seeds), "--out", o],  # no valid URL in it
        ["--seeds", str(good), "--out", o, "--dns-server", "nonsense"],
        ["--seeds", str(good), "--out", o, "--allow-networks", "300.1.1.0/24"],
        ["--seeds", str(good), "--out", o, "--host-delay", "-1"],
        ["--seeds", str(good), "--out", o, "--max-pages", "many"],
        ["--out", o, "--resume"],
        ["--seeds", str(good), "--out", o, "--config", str(tmp_path / "missing.toml")],
        ["--seeds", str(good), "--out", o, "--config", str(bad_config)],
    ]
    for args in cases:
        with pytest.raises(SystemExit) if "many" in args or "-1" in args else _nothing():
            assert main(["crawl", *args]) == 2, args
        err = capsys.readouterr().err
        assert "error" in err and "Traceback" not in err, (args, err)
        assert not (tmp_path / "o" / "redis").exists(), "nothing may start on bad input"
    assert main(["status", "--out", str(tmp_path / "nothing")]) == 2
    assert "holds no crawl" in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.slow
@pytest.mark.own_ray
def test_kill9_then_resume(tmp_path: Path, ray_cluster: str) -> None:
    """SIGKILL the whole crawl (CLI, Ray, embedded Redis) mid-way; --resume finishes it with no URL
    lost and only URLs in flight at the kill fetched twice; politeness holds across the restart.

    The killed run's fetch actor outlives the kill by seconds (Ray gives each worker a process group
    of its own) and may still send the requests it had begun: so fetches are counted over the whole
    server log, not split into runs, and the resume must wait for that actor (or the politeness
    audit fails)."""
    out = tmp_path / "crawl"
    with MiniWeb(tmp_path) as w:
        proc = crawl_until(w, out, pages=25)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.5)
        # What the crawl had in flight at the kill, as its (AOF-recovered) Redis remembers it.
        in_flight, pages_before = stopped_crawl_state(out)
        assert pages_before > 0
        proc = run(crawl_cmd(w, out, "--resume", "--json"), ray=ray_cluster)
        assert proc.returncode == 0, proc.stderr[-3000:]
        log = list(w.log)
        port = w.port
    report = json.loads((out / "report.json").read_text())
    assert report["stopped"] == "frontier empty"
    url = lambda r: f"http://{r['host']}:{port}{r['path']}"  # noqa: E731
    fetches = defaultdict(list)
    for r in log:
        fetches[url(r)].append(r["start"])
    # a robots.txt in flight is its origin's marker there ("http://h:port!robots…")
    in_flight |= {u.split("!", 1)[0] + "/robots.txt" for u in in_flight if "!" in u}
    twice = {u for u, times in fetches.items() if len(times) > 1}
    assert twice <= in_flight, ({u: fetches[u] for u in twice - in_flight}, proc.stderr[-3000:])
    assert all(len(fetches[u]) == 2 for u in twice), {u: fetches[u] for u in twice}
    assert reachable(port) <= set(fetches)
    v = audit(log, 0.2, 0.05)
    v["twice"] -= len(twice)
    assert v == {"host": 0, "ip": 0, "robots": 0, "twice": 0}, (v, DETAILS)
    records = list(iter_link_records(out))
    assert {r.url for r in records} >= reachable(port), sorted(reachable(port) - {r.url for r in records})


@pytest.mark.own_ray
def test_ctrl_c_and_sigterm_commit_and_resume_refetches_nothing(tmp_path: Path, ray_cluster: str) -> None:
    """Ctrl-C as a terminal sends it (SIGINT to the whole foreground process group, the Ray the
    crawl started included) mid-crawl; then, mid-resume, SIGTERM to the driver alone as ``timeout``,
    ``docker stop``, systemd and ``ray job stop`` send it: each time the crawl stops fetching,
    commits what it fetched, stops its embedded Redis (which the signal did not reach) and exits
    130 (143) with one line, leaving nothing in flight; the last --resume finishes the crawl and
    no URL is fetched twice over the three runs."""
    out = tmp_path / "crawl"
    with MiniWeb(tmp_path) as w:
        runs = []
        for how, pages, extra in (("ctrl-c", 15, ()), ("sigterm", 32, ("--resume",))):
            proc = crawl_until(w, out, pages, *extra, ray=ray_cluster if extra else None)
            t0 = time.time()
            if how == "ctrl-c":
                os.killpg(proc.pid, signal.SIGINT)
            else:
                os.kill(proc.pid, signal.SIGTERM)
            _, err = proc.communicate(timeout=120)
            err = err.decode()
            assert proc.returncode == (130 if how == "ctrl-c" else 143), (how, err[-3000:])
            assert time.time() - t0 < 60 and "Traceback" not in err, (how, err[-3000:])
            assert "interrupted; everything fetched is stored and committed" in err, (how, err[-3000:])
            in_flight, _ = stopped_crawl_state(out)
            assert in_flight == set(), how  # nothing was left fetched but uncommitted
            runs.append(len(w.log))
            time.sleep(0.3)
        proc = run(crawl_cmd(w, out, "--resume"), ray=ray_cluster)
        assert proc.returncode == 0, proc.stderr[-3000:]
        log = list(w.log)
        port = w.port
    pages = [f"http://{r['host']}:{port}{r['path']}" for r in log if r["path"] != "/robots.txt"]
    assert len(pages) == len(set(pages)), sorted(u for u in set(pages) if pages.count(u) > 1)
    assert 0 < runs[0] < runs[1] < len(log)  # each of the three runs fetched
    assert reachable(port) <= set(pages)  # and together they lost nothing


@pytest.mark.slow
def test_disk_full_stops_cleanly_then_resume(tmp_path: Path) -> None:
    """OUT on a 2 MB tmpfs (1.2 MB for what grows, ~0.8 MB for the 64 shards' duplicate stores): the
    crawl runs out of space (in Redis's AOF, the WARC, link, sieve, duplicate-store or spill files,
    whichever fills first) and stops with one line and exit 2, no traceback, no
    half-written report; with space again, --resume finishes the crawl: no URL lost (websim's
    manifest), no robots or unlinked request, and what is fetched again is bounded by the
    uncommitted window. When Redis kept every write, only URLs of its in-flight set are fetched
    again and politeness holds across the stop; a full disk can also cost Redis writes it had
    acknowledged: the resume's consistency check then refuses until `raycrawl check --repair`
    records the user's consent, and the refetches stay within the uncommitted window."""
    import json as _json

    from raycrawl.settings import Settings
    from raycrawl.websim import Websim

    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2000k", "tmpfs", str(disk)], capture_output=True,
                           text=True)
    if mount.returncode != 0:  # a real full disk is the point: no stand-in
        pytest.fail(f"this test mounts a tmpfs (needs root): {mount.stderr.strip()}")
    try:
        out = disk / "crawl"
        with Websim(hosts=40, ips=6, seed=5, out_dir=tmp_path / "web", pages_per_host_mean=8, slow_delay=SLOW_DELAY) as web:
            cmd = [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                   "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                   "--host-delay", "0.05", "--ip-delay", "0.01", "--max-urls-per-host", "60",
                   "--read-timeout", "3", "--max-retries", "1", "--retry-backoff", "0.5"]  # (hang hosts: a short timeout)
            proc = run(cmd, timeout=400)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
            assert lines[-1].startswith("raycrawl crawl: error: ") and "--resume" in lines[-1]
            assert sum(x.startswith("raycrawl crawl: error:") for x in lines) == 1  # the rest: WARNING lines
            assert not (out / "report.json.tmp").exists()
            subprocess.run(["mount", "-o", "remount,size=300m", str(disk)], check=True)
            first = len(web.requests())
            in_flight, _ = stopped_crawl_state(out)
            proc = run([*cmd, "--resume"], timeout=400)
            consented = proc.returncode == 2 and "Redis is behind the archive" in proc.stderr
            if consented:
                # The disk filled under Redis too and cost it writes it had acknowledged: the
                # resume says so instead of fetching those pages again silently; consent, go on.
                assert "Traceback" not in proc.stderr and "--repair" in proc.stderr.splitlines()[-1]
                assert run([sys.executable, "-m", "raycrawl", "check", str(out), "--repair"]).returncode == 0
                proc = run([*cmd, "--resume"], timeout=400)
            assert proc.returncode == 0, proc.stderr[-3000:]
            requests = web.requests()
            report = web.audit(0.05, 0.01)
            manifest = web.manifest
        assert first > 20 and len(requests) > first
        assert report.count("robots") == 0 and report.count("unlinked") == 0, report.summary()
        twice = {v.key for v in report.violations if v.kind == "duplicate"}
        if consented:  # Redis lost acknowledged writes: the refetches the user consented to, within the window
            window = Settings().max_uncommitted + 2 * Settings().batch  # docs/crawling.md
            assert len(twice) <= window, report.summary()
        else:  # Redis kept everything: only its in-flight URLs again, and politeness across the stop
            assert twice <= in_flight, sorted(twice - in_flight)[:10]
            assert report.count("host") == report.count("ip") == 0, report.summary()
        assert _json.loads((out / "report.json").read_text())["stopped"] == "frontier empty"
        urls = {r.url for r in iter_link_records(out)}
        missing = {u for u in manifest.reachable() if manifest.allowed(u)} - urls
        assert len(missing) <= 0.05 * len(urls), sorted(missing)[:10]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
@pytest.mark.own_ray
def test_crawl_websim_audit(tmp_path: Path) -> None:
    """A full crawl of a small websim (traps, faults, robots variety, duplicates, the cases only a
    browser-exact reader gets right, two sites on both http and https): websim's own audit finds no
    politeness (per host name, whatever the scheme), robots (an https page only after the https
    robots.txt), duplicate-fetch or unlinked-URL violation, every fault is classified, and the
    archive (read with warcio) holds every page served, byte for byte, with revisit records only
    for byte-identical payloads."""
    from archive_check import check_archive

    from raycrawl.websim import Websim

    config = tmp_path / "crawl.toml"
    config.write_text("[crawl]\nread_timeout = 3.0\nconnect_timeout = 2.0\nmax_retries = 1\nretry_backoff = 0.5\n"
                      "max_crawl_delay = 2.0\nfetch_actors = 2\n"  # two fetch actors share one workbench
                      "robots_ttl = 3.0\n")  # rules expire mid-crawl: robots.txt is fetched again
    out = tmp_path / "crawl"
    params = {"hosts": 40, "ips": 6, "seed": 5, "pages_per_host_mean": 8, "https_hosts": 2, "slow_delay": SLOW_DELAY}
    with Websim(**params, out_dir=tmp_path / "web") as web:
        started = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
             "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
             # (100, not 60: the two sites on both schemes have each page under two URLs)
             "--host-delay", "0.1", "--ip-delay", "0.02", "--max-urls-per-host", "100", "--config", str(config),
             "--dashboard"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)})
        live = live_status(proc, out)
        actors = dashboard_actors(proc, out)
        _, err = proc.communicate(timeout=400)
        assert proc.returncode == 0, err[-3000:]
        assert "Ray dashboard: http://127.0.0.1:" in err
        # --dashboard: Ray's dashboard answered while the crawl ran, naming the agent's actors well
        assert actors is not None, "the dashboard did not answer while the crawl ran"
        classes = {a["class_name"] for a in actors}
        assert {"FetchActor", "CrewWorker"} <= classes, classes
        assert all(a["repr_name"] == f"{a['class_name']}({a['name']})" for a in actors if a["state"] == "ALIVE"), actors
        # `raycrawl status` of the running crawl: its elapsed time, its current rate, its busiest hosts
        assert live is not None, "the crawl ended before status could read it running"
        assert 0 < live["elapsed_s"] < time.time() - started and live["rate"] > 0, live
        done = [r["done"] for r in live["hosts"]]
        assert len(done) == 10 and done == sorted(done, reverse=True) and done[0] > 0, live["hosts"]
        assert all(r["queued"] >= 0 and r["in_flight"] >= 0 for r in live["hosts"])
        audit_report = web.audit(0.1, 0.02)
        manifest = web.manifest
        archive = check_archive(out / "warc", web, params)
        requests = web.requests()
        targets = {(r.host.split(":")[0], r.target) for r in requests}
        schemes = {(web.scheme_of(r.host), r.host.split(":")[0], r.target != "/robots.txt")
                   for r in requests if r.status == 200 or r.target == "/robots.txt"}
        both = web.info["https_hosts"]
    assert archive["pages_checked"] > 100 and archive["duplicates_kept_whole"] > 0, archive
    assert archive["revisits"] > 0, archive  # websim's /index.html copies are byte-identical: revisits
    # the browser-exact cases were met: robots.txt on another authority, a Latin-1 Location,
    # a legacy-encoded query (websim.model._make_browser_cases)
    kinds = {rec["robots"] for rec in manifest.hosts.values()}
    assert {"redirect_cross", "bom_truncated", "ray_group", "flaky_5xx"} <= kinds
    assert any(t.startswith("/robots-for/") for _, t in targets)
    assert any(t.startswith("/caf%E9") for _, t in targets) and any(t.startswith("/find?q=") for _, t in targets)
    assert audit_report.requests > 100
    # the sites on both schemes were crawled under both, robots.txt and pages, as one host each
    assert len(both) == 2 and all((s, h, page) in schemes for s in ("http", "https") for h in both
                                  for page in (False, True)), (both, [x for x in schemes if x[1] in both])
    assert audit_report.ok, audit_report.summary()  # (pages after an expiry obey the file fetched again)
    assert audit_report.robots_refetches > 0
    report = json.loads((out / "report.json").read_text())
    assert report["stopped"] == "frontier empty"
    records = list(iter_link_records(out))
    assert len(records) == report["pages"]
    # every reachable page the robots rules allow (per websim's manifest) was crawled
    urls = {r.url for r in records}
    missing = {u for u in manifest.reachable() if manifest.allowed(u)} - urls
    assert len(missing) <= 0.05 * len(urls), sorted(missing)[:10]
    # faults are classified: no record has a status-0 answer without an error kind
    assert all(r.error for r in records if r.status == 0)
    # <link rel=canonical> is recorded as websim wrote it
    canon = {r.url: r.canonical for r in records if r.status == 200 and r.ctype == "text/html"}
    expected = {u: p["canonical"] for u, p in manifest.pages.items() if u in canon and not p["labels"].count("malformed")}
    assert expected and all(canon[u] == c for u, c in expected.items()), [
        (u, canon[u], c) for u, c in expected.items() if canon[u] != c][:5]
    assert any(expected.values())
    # pywb replays every capture from the CDXJ index written beside the crawl, duplicates included
    from pywb_replay import captures, check_replay, cut_short, get, pywb
    from warcio.archiveiterator import ArchiveIterator

    proc = run([sys.executable, "-m", "raycrawl", "warc", "index", str(out), "--pywb",
                str(tmp_path / "pywb" / "collections" / "crawl")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    replayable, revisits = captures(out / "warc")
    assert revisits > 0 and len(replayable) > 0.95 * archive["pages_checked"], (revisits, len(replayable))
    cut = cut_short(out / "warc")
    assert cut and archive["cut_short_checked"] > 0, (cut, archive)
    # the same crawl as one WACZ file: webrecorder's validator accepts it, its page list holds the
    # crawl's pages, and pywb unpacks it into a collection that replays every capture as well
    wacz = tmp_path / "crawl.wacz"
    proc = run([sys.executable, "-m", "raycrawl", "warc", "wacz", str(out), "-o", str(wacz)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    tools = ROOT / ".venv-pywb" / "bin"
    valid = run([str(tools / "wacz"), "validate", "-f", str(wacz)], timeout=300)
    assert valid.returncode == 0 and "WACZ is valid" in valid.stdout, valid.stdout[-2000:] + valid.stderr[-2000:]
    with zipfile.ZipFile(wacz) as z:
        header, *lines = z.read("pages/pages.jsonl").decode().splitlines()
    listed = [json.loads(line)["url"] for line in lines]
    html_200 = set()  # every whole 200 text/html response of the archive, read by warcio
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if (rec.rec_type == "response" and not rec.rec_headers.get_header("WARC-Truncated")
                        and rec.http_headers.get_statuscode() == "200"
                        and (rec.http_headers.get_header("Content-Type") or "").startswith("text/html")):
                    html_200.add(rec.rec_headers.get_header("WARC-Target-URI"))
    assert json.loads(header)["format"] == "json-pages-1.0" and len(listed) == len(set(listed))
    assert set(listed) <= html_200 and len(listed) > 0.8 * len(html_200), (len(listed), len(html_200))
    for args in (["init", "fromwacz"], ["add", "--unpack-wacz", "fromwacz", str(wacz)]):
        added = run([str(tools / "wb-manager"), *args], cwd=tmp_path / "pywb", timeout=300)
        assert added.returncode == 0, added.stderr[-2000:]
    with pywb(tmp_path / "pywb") as port:
        check_replay(port, "crawl", replayable)
        check_replay(port, "fromwacz", replayable)
        # a body the server cut short is never replayed as the page with its 200
        assert all(get(port, f"/crawl/{stamp}id_/{url}")[0] != 200 for url, stamp in cut), cut


def live_status(proc: subprocess.Popen, out: Path) -> dict | None:
    """``raycrawl status --out OUT --json`` (its rate over 3 s) once the running crawl has committed
    100 pages and some in those 3 s; else the last status read while it ran (None if none). (Not
    sooner: its first commits come in bursts — a clean clone's run saw 25 pages, then none for
    over 2 s while its crew's stages made their first batches on a loaded machine, then 120 at
    once; and later, a run under load committed nothing for 3 s while its hosts waited on a hang
    host's timeouts and Crawl-delays, with 114 URLs queued.)"""
    last = None
    while proc.poll() is None:
        if (out / "redis-url").exists():
            st = run([sys.executable, "-m", "raycrawl", "status", "--out", str(out), "--json", "--interval", "3"],
                     timeout=60)
            if st.returncode == 0:
                status = json.loads(st.stdout)
                if status["running"] and status["stats"].get("pages", 0) - round(3 * (status["rate"] or 0)) >= 100:
                    last = status
                    if status["rate"]:
                        return status
        time.sleep(0.5)
    return last


def dashboard_actors(proc: subprocess.Popen, out: Path) -> list[dict] | None:
    """The actors Ray's dashboard (``OUT/dashboard-url``) lists while the crawl runs (None if it
    ended first)."""
    import urllib.request

    while proc.poll() is None:
        url = out / "dashboard-url"
        if url.exists():
            try:
                with urllib.request.urlopen(url.read_text().strip() + "/api/v0/actors?detail=1&limit=100",
                                            timeout=10) as answer:
                    return json.load(answer)["data"]["result"]["result"]
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.5)
    return None


def test_progress_line_and_report_format(tmp_path: Path) -> None:
    import io

    from raycrawl.progress import Progress
    from raycrawl.report import build_report, format_report, write_report

    tty = io.StringIO()
    p = Progress(interval=0, stream=tty, tty=True)
    p.show({"pages": 10, "pages/s": "2.0"})
    p.show({"pages": 11, "pages/s": "2.2"})
    p.close()
    assert tty.getvalue() == "\rpages 10  pages/s 2.0\rpages 11  pages/s 2.2\n"
    log = io.StringIO()
    Progress(interval=0, stream=log, tty=False).show({"pages": 3})
    assert log.getvalue().endswith(" progress: pages 3\n")
    stats = {"pages": 5, "status:200": 4, "status:0": 1, "error:dns": 1, "ctype:text/html": 4, "dup:exact": 1}
    report = build_report(stats, elapsed=2.0, run_pages=5, stopped="frontier empty")
    assert report["by_status"] == {"0": 1, "200": 4} and report["errors"] == {"dns": 1}
    assert report["pages_per_s"] == 2.5 and report["duplicates"] == {"exact": 1, "near": 0}
    write_report(tmp_path / "report.json", report)
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert "dns:1" in format_report(report)
