"""The operator's control plane (storage/operator_control.py, policies/operator_policy.py,
``raycrawl ctl``): commands validated before anything changes, read back by every reader, and in a
real crawl (websim's request log is the judge) applied within seconds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from raycrawl.errors import UserError
from raycrawl.policies.operator_policy import OperatorPolicy
from raycrawl.storage.operator_control import Control, ControlView
from raycrawl.storage.operator_verbs import command

ROOT = Path(__file__).resolve().parents[1]
DENY = r"[02468]\.html$"  # pages whose number is even


@pytest.fixture
def control(redis_url):
    client = redis.Redis.from_url(redis_url)
    client.hset("rc:meta", "started", 1)
    yield Control(client, "rc:")
    client.close()


def test_commands_change_what_readers_see(control) -> None:
    view = ControlView(control, refresh=0.0)
    assert not view.current().paused and view.current().refuse("http://a.test/x", "a.test") is None
    command(control, "pause", [], "ann")
    assert view.current().paused
    command(control, "resume", [], "ann")
    command(control, "block", ["A.test", "org,example,"], "ann")
    p = view.current()
    assert not p.paused
    assert p.refuse("http://a.test/x", "a.test") == p.refuse("https://a.test:8443/", "a.test") == "blocked"
    assert p.refuse("http://www.example.org/x", "www.example.org") == "blocked"  # a SURT prefix: subdomains too
    assert p.refuse("http://b.test/", "b.test") is None and p.refuse("http://examples.org/", "examples.org") is None
    command(control, "unblock", ["a.test"], "bob")
    command(control, "throttle", ["b.test", "2.5"], "bob")
    command(control, "throttle", ["org,example,", "0.01"], "bob")
    command(control, "budget", ["c.test", "3"], "bob")
    command(control, "scope", ["deny", r"/private/"], "bob")
    p = view.current()
    assert p.refuse("http://a.test/x", "a.test") is None
    assert p.delay("b.test") == 2.5 and p.delay("www.example.org") == 0.01 and p.delay("a.test") is None
    assert p.budget("c.test") == 3 and [control.spend("c.test") for _ in range(4)] == [1, 2, 3, 4]
    assert p.refuse("http://d.test/private/1", "d.test") == "operator-scope"
    command(control, "scope", ["allow", "surt:test,d,"], "bob")
    p = view.current()
    assert p.refuse("http://d.test/ok", "d.test") is None and p.refuse("http://e.test/", "e.test") == "operator-scope"
    command(control, "scope", ["remove", "surt:test,d,"], "bob")
    command(control, "throttle", ["b.test", "off"], "bob")
    p = view.current()
    assert p.refuse("http://e.test/", "e.test") is None and p.delay("b.test") is None
    log = control.log_since()
    assert [f["verb"] for _, f in log][:3] == ["pause", "resume", "block"] and log[0][1]["who"] == "ann"
    assert control.log_since(log[-2][0]) == log[-1:]


@pytest.mark.parametrize("verb,args", [
    ("frobnicate", []), ("pause", ["now"]), ("block", []), ("block", ["not a host!"]), ("throttle", ["a.test"]),
    ("throttle", ["a.test", "-1"]), ("throttle", ["a.test", "fast"]), ("budget", ["a.test", "1.5"]),
    ("scope", ["deny", "("]), ("scope", ["maybe", "x"]), ("seeds", ["add", "ftp://a.test/"]), ("seeds", ["add"]),
])
def test_bad_commands_change_nothing(control, verb, args) -> None:
    before = control.read()
    with pytest.raises(UserError):
        command(control, verb, args, "ann")
    after = control.read()
    assert (after.version, after.rules, after.paused) == (before.version, before.rules, before.paused)


def test_seeds_queue_until_taken(control, tmp_path) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("# new\nhttp://b.test/\n\nhttp://C.test/x\n")
    command(control, "seeds", ["add", "http://a.test", str(f)], "ann")
    assert control.peek_seeds() == ["http://a.test/", "http://b.test/", "http://c.test/x"]
    control.drop_seeds(2)
    assert control.peek_seeds() == ["http://c.test/x"]


def test_the_lead_agent_copies_commands_and_delivers_seeds(control, tmp_path) -> None:
    """operator.log gets each command once, also across a restart whose last line was torn; seeds
    leave the queue only when delivered, and the stages' verdict filters them."""
    from raycrawl.actors.cluster.operator_inbox import OperatorInbox

    log = tmp_path / "operator.log"
    command(control, "block", ["a.test"], "ann")
    command(control, "seeds", ["add", "http://a.test/", "http://b.test/"], "ann")
    inbox = OperatorInbox(ControlView(control), log)
    delivered: list[list[str]] = []
    assert inbox.poll(lambda url, host: "blocked" if host == "a.test" else None,
                      lambda urls: delivered.append(urls) or False) == 0  # an agent is gone: kept
    assert control.peek_seeds() == ["http://a.test/", "http://b.test/"]
    inbox.next_poll = 0
    assert inbox.poll(lambda url, host: None, lambda urls: delivered.append(urls) or True) == 2
    assert control.peek_seeds() == [] and delivered[-1] == ["http://a.test/", "http://b.test/"]
    command(control, "pause", [], "bob")
    log.write_text(log.read_text() + '{"id": "torn')  # a kill mid-line
    again = OperatorInbox(ControlView(control), log)
    again.poll(lambda url, host: None, lambda urls: True)
    lines = log.read_text().splitlines()
    assert lines[2] == '{"id": "torn' and [json.loads(x)["verb"] for x in lines[:2] + lines[3:]] == [
        "block", "seeds add", "pause"]
    assert OperatorInbox(ControlView(control), None).poll(lambda u, h: None, lambda urls: True) == 0  # not the lead


def test_policy_of_an_empty_state_refuses_nothing() -> None:
    from raycrawl.storage.operator_control import ControlState

    p = OperatorPolicy(ControlState())
    assert p.empty and p.refuse("http://a.test/", "a.test") is None and p.delay("a.test") is None


def test_throttle_never_goes_below_crawl_delay() -> None:
    from raycrawl.policies.politeness import Politeness

    pol = Politeness(host_delay=1.0, max_crawl_delay=30.0)
    assert pol.host_next(10.0, None, 0.2) == 10.2      # lower than the default
    assert pol.host_next(10.0, None, 5.0) == 15.0      # higher
    assert pol.host_next(10.0, 3.0, 0.2) == 13.0       # robots.txt's Crawl-delay still holds
    assert pol.host_next(10.0, 3.0) == 13.0 and pol.host_next(10.0) == 11.0


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raycrawl", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_ctl_user_errors_are_one_line(tmp_path, redis_url) -> None:
    r = run_cli("ctl", str(tmp_path), "pause")
    assert r.returncode == 2 and "holds no crawl" in r.stderr and "Traceback" not in r.stderr
    for cmd in (["ctl", "--redis-url", "redis://127.0.0.1:1", "pause"], ["console", "--redis-url", "redis://127.0.0.1:1"]):
        r = run_cli(*cmd)  # a Redis that is gone
        assert r.returncode == 2 and "cannot reach" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("ctl", "--redis-url", redis_url, "--prefix", "nope:", "pause")
    assert r.returncode == 2 and "no crawl under prefix" in r.stderr and "Traceback" not in r.stderr
    client = redis.Redis.from_url(redis_url)
    client.hset("ctlcli:meta", "started", 1)
    r = run_cli("ctl", "--redis-url", redis_url, "--prefix", "ctlcli:", "throttle", "a.test", "-3")
    assert r.returncode == 2 and "≥ 0" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("ctl", "--redis-url", redis_url, "--prefix", "ctlcli:", "--operator", "ann", "block", "a.test")
    assert r.returncode == 0, r.stderr
    r = run_cli("ctl", "--redis-url", redis_url, "--prefix", "ctlcli:", "--json", "show")
    shown = json.loads(r.stdout)
    assert shown["rules"]["block host:a.test"]["who"] == "ann" and not shown["paused"]
    client.close()


# --- a crawl --------------------------------------------------------------------------------------

def _requests_after(web, t: float, host: str | None = None) -> list:
    web.flush_log()
    return [r for r in web.requests() if r.start >= t and (host is None or r.host.split(":")[0] == host)]


def start_crawl(web, out: Path, *extra: str, session: bool = False, host_delay: float = 0.1,
                ray: str | None = None) -> subprocess.Popen:
    """``raycrawl crawl`` over websim, returned once websim saw 5 requests. The largest host sets a
    crawl's length (the steered web's has 255 pages: 26 s at 0.1 s, 77 s at 0.3 s); a crawl that
    must outlast a browser's start goes slower. ``ray``: the address of a cluster to join."""
    cmd = [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
           "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
           "--host-delay", str(host_delay), "--ip-delay", "0.0", "-s", "read_timeout=3", *extra]
    crawl = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env=dict(os.environ, RAY_AUTH_MODE="disabled", **({"RAY_ADDRESS": ray} if ray else {})),
                             start_new_session=session)
    if "--resume" in extra:
        return crawl
    deadline = time.time() + 120
    while not (out / "redis-url").exists() or len(_requests_after(web, 0)) < 5:
        assert crawl.poll() is None and time.time() < deadline, crawl.communicate()[1][-3000:]
        time.sleep(0.5)
    return crawl


@pytest.mark.slow
def test_operator_steers_a_running_crawl(tmp_path: Path) -> None:
    """One crawl, steered while it runs, judged by websim's request log: ``block`` — no request to
    the host once the command and the fetches in flight are over, and the rest still crawled;
    ``throttle`` — gaps ≥ the new delay; ``pause`` — no new requests; ``seeds add`` — a URL no page
    links to is requested; ``resume`` — the crawl finishes; operator.log says who did what."""
    from collections import Counter

    from raycrawl.websim import Websim

    with Websim(hosts=30, ips=6, seed=5, clean=True, pages_per_host_mean=25, out_dir=tmp_path / "web") as web:
        m = web.manifest
        sizes = Counter(p["host"] for p in m.pages.values() if p["kind"] == "html" and p["status"] == 200)
        slow, blocked = [h for h, _ in sizes.most_common(2)]  # the seed host (throttled), the next (blocked)
        out = tmp_path / "crawl"
        crawl = start_crawl(web, out)
        try:
            ctl = ["ctl", "--operator", "tester", str(out)]
            for command in (["block", blocked], ["throttle", slow, "2"], ["scope", "deny", DENY]):
                r = run_cli(*ctl, *command)
                assert r.returncode == 0, r.stderr
            t_cmd = time.time()
            time.sleep(15)  # (a loaded run once saw no request in a 7 s window: 10 s after the 5 s grace)
            t_unthrottle = time.time()
            assert run_cli(*ctl, "throttle", slow, "off").returncode == 0
            assert run_cli(*ctl, "pause").returncode == 0
            t_pause = time.time()
            time.sleep(8)
            seed = f"http://{slow}:{web.port}/operator-seed-{os.getpid()}"
            assert run_cli(*ctl, "seeds", "add", seed).returncode == 0
            t_resume = time.time()
            assert run_cli(*ctl, "resume").returncode == 0
            _, err = crawl.communicate(timeout=400)
            assert crawl.returncode == 0, err[-3000:]
        finally:
            if crawl.poll() is None:
                crawl.kill()
        # (fetches in flight at a command end within read_timeout, 3 s; a command applies within 2 s)
        assert _requests_after(web, t_cmd + 5, blocked) == []
        denied = [r.target for r in _requests_after(web, t_cmd + 5) if re.search(DENY, r.target)]
        assert denied == [], denied[:3]
        starts = sorted(r.start for r in _requests_after(web, t_cmd + 5, slow) if r.start < t_unthrottle)
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert len(starts) >= 2 and min(gaps) >= 2.0 - 0.05, gaps
        assert [r for r in _requests_after(web, t_pause + 5) if r.start < t_resume] == []
        requested = {(r.host.split(":")[0], r.target) for r in web.requests()}
        assert (slow, seed.split(str(web.port), 1)[1]) in requested
        reached = m.reachable(skip=lambda u: m.pages[u]["host"] == blocked or re.search(DENY, u) is not None)
        got = {f"http://{h}:{web.port}{t}" for h, t in requested}
        assert reached - got == set(), sorted(reached - got)[:5]  # the rest of the web, to the end
        oplog = [json.loads(line) for line in (out / "operator.log").read_text().splitlines()]
        assert [e["verb"] for e in oplog] == ["block", "throttle", "scope", "throttle", "pause", "seeds add", "resume"]
        assert {e["who"] for e in oplog} == {"tester"}
        report = json.loads((out / "report.json").read_text())
        assert report["stopped"] == "frontier empty"


# --- the console (raycrawl console): REST API and page ---------------------------------------------

@pytest.fixture
def console_app(control, redis_url):
    from raycrawl.commands.console import Console, make_app

    def build(tokens=None):
        return make_app(Console(redis_url, "rc:", None, tokens))
    return build


async def _serve(app):
    from loopback_http import serve

    return await serve(app)


def test_rest_api_reads_and_commands(console_app, control) -> None:
    import aiohttp

    async def go():
        runner, port = await _serve(console_app())
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as s:
                async with s.get(f"{base}/api/status") as r:
                    st = await r.json()
                    assert r.status == 200 and st["operator"]["paused"] is False and "frontier" in st
                async with s.post(f"{base}/api/ctl", json={"verb": "block", "args": ["a.test"]}) as r:
                    assert r.status == 200 and (await r.json())["operator"] == "console"
                async with s.post(f"{base}/api/ctl", json={"verb": "throttle", "args": ["a.test", "-1"]}) as r:
                    assert r.status == 400 and "≥ 0" in (await r.json())["error"]
                async with s.post(f"{base}/api/ctl", data="nope") as r:
                    assert r.status == 400
                async with s.post(f"{base}/api/ctl", json={"verb": "pause"},
                                  headers={"Origin": "http://evil.example"}) as r:
                    assert r.status == 403  # another site's page cannot steer the crawl
                async with s.get(f"{base}/?q=zzz") as r:
                    page = await r.text()
                    assert r.status == 200 and "block host:a.test" in page and "running" in page
        finally:
            await runner.cleanup()

    asyncio_run(go())
    assert control.read().of_kind("block") and not control.read().paused


def test_rest_api_wants_the_token_when_one_is_set(console_app, control, tmp_path, redis_url) -> None:
    import aiohttp

    from raycrawl.http_guard import read_tokens

    f = tmp_path / "tokens"
    f.write_text("alice s3cret-s3cret-s3cret\n")
    f.chmod(0o600)
    tokens = read_tokens(f)

    async def go():
        runner, port = await _serve(console_app(tokens))
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as s:
                for method, path in (("GET", "/api/status"), ("POST", "/api/ctl"), ("GET", "/")):
                    async with s.request(method, base + path, json={"verb": "pause"}) as r:
                        assert r.status == 401, (method, path)
                async with s.post(f"{base}/api/ctl", json={"verb": "pause"},
                                  headers={"Authorization": "Bearer wrong-wrong-wrong-wrong"}) as r:
                    assert r.status == 401
                async with s.post(f"{base}/api/ctl", json={"verb": "pause"},
                                  headers={"Authorization": "Bearer s3cret-s3cret-s3cret"}) as r:
                    assert r.status == 200 and (await r.json())["operator"] == "alice"
        finally:
            await runner.cleanup()

    asyncio_run(go())
    assert control.read().paused and control.log_since()[-1][1]["who"] == "alice"
    f.chmod(0o644)
    with pytest.raises(UserError):
        read_tokens(f)
    r = run_cli("console", "--redis-url", redis_url, "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2 and "--token-file" in r.stderr and "Traceback" not in r.stderr


def test_the_console_answers_only_its_own_names(console_app, control, redis_url) -> None:
    """DNS rebinding: a page of attacker.example whose name resolves to 127.0.0.1 sends its requests
    with ``Host: attacker.example:PORT`` (and its Origin): refused (403), GET and POST alike, and
    nothing is steered; the console's own names (loopback, ``localhost`` and its subdomains, the
    bound address, ``--allow-host``) are answered."""
    import aiohttp

    from raycrawl.commands.console import Console, make_app
    from raycrawl.http_guard import Names

    async def go():
        runner, port = await _serve(console_app())
        allowing, port2 = await _serve(make_app(Console(redis_url, "rc:", None, None),
                                                Names("127.0.0.1", ["console.lan"])))
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as s:
                evil = {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"}
                for method, path in (("POST", "/api/ctl"), ("GET", "/api/status"), ("GET", "/"), ("POST", "/ctl")):
                    async with s.request(method, base + path, json={"verb": "pause"}, headers=evil) as r:
                        assert r.status == 403, (method, path, r.status)
                    async with s.request(method, base + path, json={"verb": "block", "args": ["a.test"]},
                                         headers={"Host": f"attacker.example:{port}"}) as r:
                        assert r.status == 403, (method, path, r.status)
                for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"app.localhost:{port}", f"[::1]:{port}",
                             "LOCALHOST."):
                    async with s.get(f"{base}/api/status", headers={"Host": host}) as r:
                        assert r.status == 200, (host, r.status)
                # a name allowed by the console's own page is not a key to another origin's POST
                async with s.post(f"{base}/api/ctl", json={"verb": "pause"},
                                  headers={"Host": f"127.0.0.1:{port}", "Origin": f"http://localhost:{port}"}) as r:
                    assert r.status == 403
                async with s.get(f"http://127.0.0.1:{port2}/api/status", headers={"Host": f"console.lan:{port2}"}) as r:
                    assert r.status == 200
                async with s.get(f"{base}/api/status", headers={"Host": f"console.lan:{port}"}) as r:
                    assert r.status == 403  # (not one of this console's names)
        finally:
            await runner.cleanup()
            await allowing.cleanup()

    asyncio_run(go())
    assert not control.read().paused and not control.read().of_kind("block")


@pytest.mark.slow
def test_a_rebound_name_in_a_real_browser_reaches_nothing(console_app, control, tmp_path: Path) -> None:
    """Chromium resolving attacker.example to 127.0.0.1 (DNS rebinding, by its host-resolver rules):
    the console's page at that name is a 403, and a fetch() POST from it to the console's REST API
    steers nothing; at 127.0.0.1 the same browser reads and pauses the crawl."""
    import json as json_

    from browser_cdp import browser

    async def drive() -> tuple[str, object]:
        runner, port = await _serve(console_app())
        try:
            async with browser(tmp_path, "--host-resolver-rules=MAP attacker.example 127.0.0.1") as b:
                await b.call("Page.navigate", url=f"http://attacker.example:{port}/")
                await b.wait_for("document.readyState === 'complete' && location.hostname === 'attacker.example'")
                text = await b.evaluate("document.body ? document.body.innerText : ''")
                posted = await b.evaluate(
                    "fetch('/api/ctl', {method: 'POST', headers: {'Content-Type': 'application/json'}, "
                    f"body: {json_.dumps(json_.dumps({'verb': 'pause'}))}}}).then(r => r.status)")
                await b.goto(f"http://127.0.0.1:{port}/")
                assert await b.evaluate("document.getElementById('state').textContent") == "running"
                await b.evaluate("document.querySelector('button[value=pause]').click()")
                await b.wait_for("document.getElementById('state') && "
                                 "document.getElementById('state').textContent === 'paused'")
                return text, posted
        finally:
            await runner.cleanup()

    assert not control.read().paused
    text, posted = asyncio_run(drive())
    assert "does not answer to that name" in text and posted == 403, (text, posted)
    assert [e[1]["verb"] for e in control.log_since()] == ["pause"]  # the click at 127.0.0.1, and nothing else


def console_status(url: str, out: Path) -> dict:
    from raycrawl.commands.console import Console

    return Console(url, "rc:", out, None).status()


def asyncio_run(coro):  # noqa: ANN001, ANN201
    import asyncio

    return asyncio.run(coro)


@pytest.mark.slow
def test_console_page_pauses_a_crawl_in_a_real_browser(tmp_path: Path) -> None:
    """Headless Chromium opens the console of a running crawl, reads its state, clicks pause and
    sees "paused"; websim's log shows no request from then on (in-flight fetches aside) until the
    REST API resumes the crawl, which then ends."""
    import asyncio

    from browser_cdp import browser

    from raycrawl.commands.console import Console, make_app
    from raycrawl.websim import Websim

    with Websim(hosts=20, ips=4, seed=6, clean=True, pages_per_host_mean=25, out_dir=tmp_path / "web") as web:
        out = tmp_path / "crawl"
        crawl = start_crawl(web, out, host_delay=0.3)
        try:
            url = (out / "redis-url").read_text().strip()

            async def drive() -> tuple[float, float]:
                runner, port = await _serve(make_app(Console(url, "rc:", out, None)))
                try:
                    async with browser(tmp_path) as b:
                        await b.goto(f"http://127.0.0.1:{port}/")
                        assert await b.evaluate("document.getElementById('state').textContent") == "running"
                        assert "pages" in await b.evaluate("document.getElementById('numbers').textContent")
                        st = console_status(url, out)
                        assert st["timeline"]["rows"] and st["timeline"]["columns"][:2] == ("time", "pages")
                        await b.evaluate("document.querySelector('button[value=pause]').click()")
                        t_click = time.time()
                        await b.wait_for("document.getElementById('state') && "
                                         "document.getElementById('state').textContent === 'paused'")
                        await asyncio.sleep(8)
                        t_resume = time.time()
                        import aiohttp

                        async with aiohttp.ClientSession() as s, s.post(
                                f"http://127.0.0.1:{port}/api/ctl", json={"verb": "resume"}) as r:
                            assert r.status == 200
                        return t_click, t_resume
                finally:
                    await runner.cleanup()

            t_click, t_resume = asyncio_run(drive())
            _, err = crawl.communicate(timeout=400)
            assert crawl.returncode == 0, err[-3000:]
        finally:
            if crawl.poll() is None:
                crawl.kill()
        assert [r for r in _requests_after(web, t_click + 5) if r.start < t_resume] == []
        assert _requests_after(web, t_resume)  # and it went on
    oplog = [json.loads(line) for line in (out / "operator.log").read_text().splitlines()]
    assert [(e["verb"], e["who"]) for e in oplog] == [("pause", "console"), ("resume", "console")]


@pytest.mark.slow
@pytest.mark.own_ray
def test_a_crawl_killed_while_paused_resumes_paused(tmp_path: Path, ray_cluster: str) -> None:
    """kill -9 of the whole crawl while it is paused; ``--resume`` starts it paused (websim sees no
    request but what the killed run's workers had begun) until ``resume``, then it ends."""
    from raycrawl.websim import Websim

    with Websim(hosts=12, ips=3, seed=7, clean=True, pages_per_host_mean=20, out_dir=tmp_path / "web") as web:
        out = tmp_path / "crawl"
        crawl = start_crawl(web, out, session=True)
        assert run_cli("ctl", str(out), "pause").returncode == 0
        time.sleep(3)
        os.killpg(crawl.pid, signal.SIGKILL)
        crawl.wait()
        t_kill = time.time()
        # (the kill took the first run's own Ray with it: the resume joins the session's)
        resumed = start_crawl(web, out, "--resume", session=True, ray=ray_cluster)
        try:
            deadline = time.time() + 180
            timeline = out / "timeline" / "agent0.tsv"  # a row every 2 s from the agent's loop
            while not (timeline.exists() and timeline.stat().st_mtime > t_kill + 1):
                assert resumed.poll() is None and time.time() < deadline, resumed.communicate()[1][-3000:]
                time.sleep(0.5)
            time.sleep(8)  # the resumed run's loop turns, paused
            t_resume = time.time()
            assert [r for r in _requests_after(web, t_kill + 5) if r.start < t_resume] == []
            r = run_cli("ctl", str(out), "resume")
            assert r.returncode == 0, r.stderr
            _, err = resumed.communicate(timeout=400)
            assert resumed.returncode == 0, err[-3000:]
        finally:
            if resumed.poll() is None:
                os.killpg(resumed.pid, signal.SIGKILL)
        assert _requests_after(web, t_resume)
    assert json.loads((out / "report.json").read_text())["stopped"] == "frontier empty"


def test_a_new_verb_is_one_entry_in_the_table(control, console_app, monkeypatch, capsys) -> None:
    """A verb added to storage/operator_verbs.py's table (here at run time) is at once a ``ctl``
    verb with its help, a REST command, a form on the console's page and a row of the docs' table;
    the rules it writes reach the readers' policy (a verb whose rules are of a new kind adds its
    meaning to policies/operator_policy.py: the second file)."""
    from raycrawl.cli import main
    from raycrawl.storage import operator_verbs as ov

    def quarantine(ctl, args, who):  # noqa: ANN001, ANN202
        if not args:
            raise UserError("quarantine: give hosts")
        return ctl.set_rules("quarantine", [("block " + ov.target_of(a), 1) for a in args], who)

    monkeypatch.setattr(ov, "VERBS", [*ov.VERBS, ov.Verb("quarantine", "HOST...", "hold hosts for review",
                                                          "nothing fetched there", "fetch actors", quarantine)])
    with pytest.raises(SystemExit):
        main(["ctl", "--help"])
    assert re.search(r"quarantine HOST\.\.\. +hold hosts for review", capsys.readouterr().out)
    assert "| `quarantine HOST…` | nothing fetched there | fetch actors |" in ov.docs_table()
    view = ControlView(control, refresh=0.0)

    async def go():
        import aiohttp

        runner, port = await _serve(console_app())
        try:
            async with aiohttp.ClientSession() as s:
                async with s.post(f"http://127.0.0.1:{port}/api/ctl", json={"verb": "quarantine", "args": ["q.test"]}) as r:
                    assert r.status == 200, await r.text()
                async with s.post(f"http://127.0.0.1:{port}/api/ctl", json={"verb": "quarantine"}) as r:
                    assert r.status == 400 and (await r.json())["error"] == "quarantine: give hosts"
                async with s.post(f"http://127.0.0.1:{port}/api/ctl", json={"verb": "show"}) as r:
                    assert "block host:q.test = 1" in (await r.json())["done"]
                async with s.get(f"http://127.0.0.1:{port}/") as r:
                    assert 'value="quarantine"' in await r.text()
        finally:
            await runner.cleanup()

    asyncio_run(go())
    assert view.current().refuse("http://q.test/x", "q.test") is not None
    assert [f["verb"] for _, f in control.log_since()] == ["quarantine"]


def test_the_docs_hold_the_verbs_table() -> None:
    from raycrawl.storage.operator_verbs import docs_table

    assert docs_table() in (ROOT / "docs" / "operating.md").read_text(), \
        "docs/operating.md: make docs writes the verbs' table"
