"""Proxies (core/proxies.py, actors/fetch/proxy_connector.py): the rules and their refusals, and
crawls of websim through real proxy servers nobody here wrote (pproxy, from PyPI): SOCKS5 with
credentials and HTTP CONNECT, each bound to a loopback address of its own for its outgoing
connections, so websim's request log (the ``peer`` column) says which requests came through which
proxy. A proxy killed mid-crawl and started again: the URLs behind it waited (never held against
their sites) and the crawl has the direct crawl's pages."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from leaks import files_holding

from raycrawl.errors import UserError
from raycrawl.proxies import CREDENTIALS_ENV, ProxyRules, parse_proxy
from raycrawl.storage.link_records import iter_link_records

ROOT = Path(__file__).resolve().parents[1]
DELAY = 0.05
SLOW = 0.5
WEB = {"hosts": 5, "ips": 2, "seed": 7, "clean": True, "pages_per_host_mean": 5}


def test_rules_pick_the_first_match_else_the_proxy(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(CREDENTIALS_ENV, raising=False)
    rules = ProxyRules("socks5h://127.0.0.1:9050", [r"direct ^https?://intranet\.", r"http://127.0.0.1:3128 \.pdf$"])
    assert rules.for_url("http://intranet.example/a") is None
    assert rules.for_url("https://example.org/x.pdf").url == "http://127.0.0.1:3128"
    default = rules.for_url("https://example.org/")
    assert default.url == "socks5h://127.0.0.1:9050" and default.remote_dns and default.password is None
    assert not ProxyRules(None, [r"direct ."]) and not ProxyRules()
    assert parse_proxy("socks5://127.0.0.1").port == 1080 and parse_proxy("http://proxy.test").port == 80


async def test_a_name_its_socks5h_proxy_resolves_is_never_looked_up() -> None:
    """A host the rules send through a socks5h proxy: the resolver answers its placeholder address
    without a query (this machine's resolver is never asked), the network policy lets that through
    (the proxy decides where the name goes); other hosts are looked up as ever."""
    from raycrawl.actors.fetch.dns import Resolver
    from raycrawl.policies.networks import NetworkPolicy

    rules = ProxyRules("socks5h://127.0.0.1:9050", [r"direct ^https?://intranet\.", r"socks5://127.0.0.1:1080 ^http://b\."])
    assert rules.resolves("a.test") and not rules.resolves("intranet.test") and not rules.resolves("b.test")
    resolver = Resolver(remote=rules.resolves)
    assert await resolver.resolve("a.test") == "proxy:a.test" and resolver.queries == 0
    assert await resolver.resolve("127.0.0.7") == "127.0.0.7"
    assert NetworkPolicy("127.0.0.0/8").allows("proxy:a.test") and not NetworkPolicy("127.0.0.0/8").allows("a.test")


def test_credentials_from_a_file_or_the_environment_never_the_url(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(CREDENTIALS_ENV, raising=False)
    creds = tmp_path / "proxy-credentials"
    creds.write_text("alice:s3cret-one\nhttp://127.0.0.1:3128 bob:s3cret-two\n")
    creds.chmod(0o600)
    rules = ProxyRules("socks5://127.0.0.1:1080", ["http://127.0.0.1:3128 pdf"], str(creds))
    a, b = rules.for_url("http://x.test/"), rules.for_url("http://x.test/a.pdf")
    assert (a.username, a.password) == ("alice", "s3cret-one") and (b.username, b.password) == ("bob", "s3cret-two")
    assert "s3cret" not in repr(a) + repr(rules.rules)
    monkeypatch.setenv(CREDENTIALS_ENV, "carol:s3cret-three")
    c = ProxyRules("socks5://127.0.0.1:1080").for_url("http://x.test/")
    assert (c.username, c.password) == ("carol", "s3cret-three")
    from raycrawl.credentials import scrub

    assert "s3cret-three" not in scrub("connecting as carol:s3cret-three")


@pytest.mark.parametrize(("proxy", "rules", "why"), [
    ("ftp://127.0.0.1:21", [], "scheme"),
    ("socks5://alice:pw@127.0.0.1:1080", [], "never in its URL"),
    ("http://127.0.0.1:3128/path", [], "SCHEME://HOST:PORT"),
    (None, ["socks5://127.0.0.1:1080"], "PROXY REGEX"),
    (None, ["direct ("], "not a regular expression"),
    (None, ["gopher://x:1 ."], "scheme"),
])
def test_bad_proxies_are_one_line_refusals(proxy, rules, why) -> None:
    with pytest.raises(UserError, match=why):
        ProxyRules(proxy, rules)


def test_a_bad_proxy_flag_is_exit_2_without_traceback(tmp_path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    for args in (["--proxy", "socks5://u:p@127.0.0.1:1080"], ["--proxy", "socks5://127.0.0.1:1080",
                                                                  "--proxy-credentials-file", str(tmp_path / "nope")]):
        r = subprocess.run([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(seeds), "--out",
                            str(tmp_path / "out"), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "u:p@" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, failed, timeout: float = 30) -> None:  # noqa: ANN001
    """Until ``proc`` accepts connections on 127.0.0.1:``port``; RuntimeError(``failed()``) if it
    exits or ``timeout`` passes first."""
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(failed()) from None
            time.sleep(0.1)


class Pproxy:
    """``pproxy -l SCHEME://127.0.0.1:PORT/@BIND`` (outgoing connections from BIND), credentials
    (``user:password``) from a file when given."""

    def __init__(self, scheme: str, bind: str, auth_file: Path | None = None, hosts_file: Path | None = None) -> None:
        """``hosts_file``: the proxy's own /etc/hosts (a mount namespace of its own, root only): the
        names only it can resolve."""
        self.scheme, self.bind, self.auth_file, self.port = scheme, bind, auth_file, _free_port()
        self.hosts_file = hosts_file
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> Pproxy:
        listen = f"{self.url}/@{self.bind}" + (f"##{self.auth_file}" if self.auth_file else "")
        cmd = [sys.executable, "-m", "pproxy", "-l", listen]
        if self.hosts_file is not None:
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mount --bind "$0" /etc/hosts && exec "$@"', str(self.hosts_file), *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_listening(self.port, self.proc, lambda: "pproxy did not start")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _crawl(web, out: Path, *args: str, env: dict | None = None, delay: float = DELAY) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
                             "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
                             "--host-delay", str(delay), "--ip-delay", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})})


def _finish(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return err


def _pages(out: Path) -> dict[str, int]:
    return {r.url: r.status for r in iter_link_records(out)}


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    """websim (``WEB``) and a direct crawl of it: (web, its pages, the hosts it asked); the tests
    after it crawl the same web through proxies and read their own slice of its request log."""
    from raycrawl.websim import Websim

    tmp = tmp_path_factory.mktemp("proxies")
    with Websim(**WEB, out_dir=tmp / "web") as web:
        _finish(_crawl(web, tmp / "direct"))
        pages = _pages(tmp / "direct")
        assert len(pages) > 15
        web.flush_log()
        assert {r.peer for r in web.requests()} == {"127.0.0.1"}
        yield web, pages, sorted({r.host.rsplit(":", 1)[0] for r in web.requests()})


def _since(web, n0: int) -> list:
    web.flush_log()
    return web.requests()[n0:]


@pytest.mark.slow
def test_a_crawl_through_socks5_and_http_connect_proxies(direct, tmp_path) -> None:
    """One crawl through two proxies: two hosts by a rule through the HTTP CONNECT one, the others
    through ``--proxy``, the SOCKS5 one, which asks for credentials (from a file) and is killed
    mid-crawl, then started again. The same pages as a direct crawl; every request (robots.txt
    included) from its proxy's address; 0 politeness violations; the URLs behind the dead proxy
    waited, none was recorded as failed; the password in no file of OUT."""
    from raycrawl.websim.audit import audit, request_url

    web, pages, hosts = direct
    auth = tmp_path / "pproxy-users"
    auth.write_text("crawler:pr0xy-pa55word\n")
    creds = tmp_path / "proxy-credentials"
    creds.write_text("crawler:pr0xy-pa55word\n")
    creds.chmod(0o600)
    socks, http = Pproxy("socks5", "127.0.0.3", auth).start(), Pproxy("http", "127.0.0.4").start()
    try:
        n0 = len(_since(web, 0))
        by_http = set(hosts[:2])
        rule = f"{http.url} ^https?://({'|'.join(h.replace('.', '[.]') for h in by_http)})[:/]"
        proc = _crawl(web, tmp_path / "proxied", "--proxy", socks.url, "--proxy-credentials-file", str(creds),
                      "--proxy-rules", rule, delay=SLOW)  # (still on when its proxy dies)
        deadline = time.time() + 60
        while len(_since(web, n0)) < 6 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        stopping = time.time()
        socks.stop()  # mid-crawl: every request through it fails until it is back
        stopped = time.time()
        time.sleep(3)
        socks.start()
        err = _finish(proc)
        assert f"proxy {socks.url} failed a request" in err, err[-3000:]
        assert "pr0xy-pa55word" not in err
        assert _pages(tmp_path / "proxied") == pages
        assert json.loads((tmp_path / "proxied" / "report.json").read_text())["proxy_failures"] > 0
        proxied = _since(web, n0)
        peers = {(r.host.rsplit(":", 1)[0] in by_http, r.peer) for r in proxied}
        assert peers == {(True, "127.0.0.4"), (False, "127.0.0.3")}, peers
        assert {r.host.rsplit(":", 1)[0] for r in proxied if r.target == "/robots.txt"} == set(hosts)
        report = audit(proxied, web.manifest, SLOW, 0.0)
        # A proxy killed while it relayed an answer: the web logged the request answered, the crawler
        # got a reset and stored nothing, and fetched the page again once the proxy was back (a clean
        # clone's run: answered through it just before the kill, fetched again 5 s later). Those, and
        # only those, may be fetched twice.
        relayed = {request_url(r, web.manifest) for r in proxied
                   if r.peer == socks.bind and r.start <= stopped and r.end >= stopping - 0.5}
        assert [v for v in report.violations if not (v.kind == "duplicate" and v.key in relayed)] == [], \
            report.violations[:5]
    finally:
        socks.stop()
        http.stop()
    assert not files_holding(tmp_path / "proxied", b"pr0xy-pa55word")  # no file of OUT (WARC, logs, report…)


class Mitmdump:
    """mitmproxy in regular mode (an HTTP proxy, CONNECT included), from its own venv (``make
    mitm``), asking for ``user:password``; it logs every request it forwards (``flow_detail=1``)."""

    BIN = ROOT / ".venv-mitm" / "bin" / "mitmdump"

    def __init__(self, confdir: Path, auth: str) -> None:
        assert self.BIN.exists(), f"{self.BIN} is missing: `make mitm` (make test does it) installs mitmproxy"
        self.port, self.confdir, self.auth = _free_port(), confdir, auth
        self.log = confdir / "mitmdump.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Mitmdump:
        self.confdir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.BIN), "--mode", "regular", "--listen-host", "127.0.0.1", "--listen-port", str(self.port),
                 "--set", f"confdir={self.confdir}", "--set", "flow_detail=1", "--set", f"proxyauth={self.auth}"],
                stdout=log, stderr=subprocess.STDOUT)
        _wait_listening(self.port, self.proc, lambda: f"mitmdump did not start: {self.log.read_text()[-2000:]}")
        return self

    def forwarded(self) -> list[str]:
        """The request target of every request it forwarded (its log's "GET http://…" lines)."""
        from urllib.parse import urlsplit

        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "GET" and parts[2].startswith("http://"):
                url = urlsplit(parts[2])
                out.append(url.path + (f"?{url.query}" if url.query else ""))
        return out

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


@pytest.mark.slow
def test_a_crawl_through_mitmproxy_and_one_it_refuses(direct, tmp_path) -> None:
    """mitmproxy (regular mode, its own HTTP proxy) asking for credentials: with the right ones, a
    crawl through it has the direct crawl's pages, each request websim logged is one mitmproxy
    forwarded, robots.txt of every host first, 0 politeness violations. With wrong ones it refuses
    every request (407): the crawl waits ``proxy_patience``, then records every URL as the
    proxy's failure (``proxy``: none held against its site, none ``robots-unavailable``), says
    why, exits 0, and websim was asked nothing; no password in a file of OUT."""
    from raycrawl.websim.audit import audit

    web, pages, hosts = direct
    mitm = Mitmdump(tmp_path / "mitm", "crawler:m1tm-pa55word").start()
    try:
        good, bad = tmp_path / "good", tmp_path / "bad"
        good.write_text("crawler:m1tm-pa55word\n")
        bad.write_text("crawler:not-the-password\n")
        good.chmod(0o600)
        bad.chmod(0o600)
        n0 = len(_since(web, 0))
        _finish(_crawl(web, tmp_path / "through", "--proxy", f"http://127.0.0.1:{mitm.port}",
                       "--proxy-credentials-file", str(good)))
        assert _pages(tmp_path / "through") == pages
        proxied = _since(web, n0)
        assert sorted(r.target for r in proxied) == sorted(mitm.forwarded())
        assert {r.host.rsplit(":", 1)[0] for r in proxied if r.target == "/robots.txt"} == set(hosts)
        report = audit(proxied, web.manifest, DELAY, 0.0)
        assert not report.violations, report.violations[:5]

        config = tmp_path / "patience.toml"
        config.write_text("[crawl]\nproxy_patience = 2.0\n")
        n1 = len(_since(web, 0))
        err = _finish(_crawl(web, tmp_path / "refused", "--proxy", f"http://127.0.0.1:{mitm.port}",
                             "--proxy-credentials-file", str(bad), "--config", str(config)))
        assert "407 Proxy Authentication Required" in err, err[-3000:]
        assert not _since(web, n1)
        refused = {r.url: (r.error, r.started) for r in iter_link_records(tmp_path / "refused")}
        # (no request was sent for any of them: none claims a start)
        assert refused and set(refused.values()) == {("proxy", None)}, refused
    finally:
        mitm.stop()
    assert not files_holding(tmp_path / "through", b"m1tm-pa55word")
    assert not files_holding(tmp_path / "refused", b"not-the-password")


def _private_hosts_available() -> str | None:
    """Why a process cannot be given an /etc/hosts of its own here (None: it can)."""
    if os.geteuid() != 0:
        return "a mount namespace of the proxy's own needs root"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    return None if probe.returncode == 0 else f"unshare --mount failed: {probe.stderr.decode()[-200:]}"


@pytest.mark.slow
@pytest.mark.skipif(_private_hosts_available() is not None, reason=str(_private_hosts_available()))
def test_socks5h_sends_names_to_the_proxy_and_never_looks_them_up(direct, tmp_path) -> None:
    """``--proxy socks5h://``: the proxy resolves the names. The crawl is given no way to resolve
    websim's names (no --dns-server, no hosts file; this machine's resolver knows no ``.test``
    host), only the proxy is (pproxy with websim's hosts file as its /etc/hosts, in a mount
    namespace of its own). The same pages as a direct crawl, every request from the proxy's
    address, robots.txt of every host first, 0 politeness violations, and no WARC record claims
    an address the crawl never knew."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from raycrawl.websim.audit import audit

    web, pages, hosts = direct
    assert subprocess.run(["getent", "hosts", "no-such-name.test"], capture_output=True).returncode != 0
    socks = Pproxy("socks5", "127.0.0.5", hosts_file=web.hosts_file).start()
    try:
        n0 = len(_since(web, 0))
        proc = subprocess.Popen(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out",
             str(tmp_path / "proxied"), "--allow-networks", "127.0.0.0/8", "--host-delay", str(DELAY),
             "--ip-delay", "0", "--proxy", f"socks5h://127.0.0.1:{socks.port}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        _finish(proc)
        assert _pages(tmp_path / "proxied") == pages  # (a name looked up here: its URLs failed as dns)
        proxied = _since(web, n0)
        assert {r.peer for r in proxied} == {"127.0.0.5"}
        assert {r.host.rsplit(":", 1)[0] for r in proxied if r.target == "/robots.txt"} == set(hosts)
        report = audit(proxied, web.manifest, DELAY, 0.0)
        assert not report.violations, report.violations[:5]
    finally:
        socks.stop()
    records = 0
    for path in (tmp_path / "proxied" / "warc").rglob("*.warc.gz"):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh, record_types=WarcRecordType.response | WarcRecordType.request):
                records += 1
                assert "WARC-IP-Address" not in rec.headers, dict(rec.headers)
    assert records >= 2 * len(pages)
