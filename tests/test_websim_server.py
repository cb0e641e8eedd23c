"""websim over the wire: real HTTP over loopback and the real DNS server, checked against the
manifest — robots variety (vs protego), traps, faults, charsets, binary bodies, virtual hosting."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import zlib

import aiohttp
import pytest
from dnslib import QTYPE, RCODE, DNSRecord
from fault_crawl import SLOW_DELAY
from protego import Protego

from raycrawl import text
from raycrawl.urls import canonicalize
from raycrawl.websim.client import HostsResolver, read_hosts_file
from raycrawl.websim.manifest import Manifest


def session(web, timeout: float = 10.0) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(resolver=HostsResolver(web.hosts_file), limit=20)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout),
                                 auto_decompress=False)


def pages_where(m: Manifest, **conds) -> list[dict]:
    return [p for p in m.pages.values() if all(p.get(k) == v for k, v in conds.items())]


def host_urls(m: Manifest, pred) -> list[str]:
    return [f"http://{h}:{m.port}" for h, rec in m.hosts.items() if pred(rec)]


async def test_pages_served_as_the_manifest_says(websim):
    m = websim.manifest
    sample = [p for p in m.pages.values()
              if p["kind"] in ("html", "pdf", "png", "error") and m.hosts[p["host"]]["fault"] is None][::7]
    async with session(websim) as s:
        for rec in sample[:150]:
            async with s.get(rec["url"], allow_redirects=False) as r:
                body = await r.read()
                assert r.status == rec["status"], rec["url"]
                assert r.headers["Content-Type"].split(";")[0] == rec["ctype"]
                if rec["kind"] == "pdf":
                    assert body.startswith(b"%PDF-")
                if rec["kind"] == "png":
                    assert body.startswith(b"\x89PNG\r\n\x1a\n")


async def test_virtual_hosting_by_host_header_on_every_ip(websim):
    m = websim.manifest
    host, rec = next((h, r) for h, r in m.hosts.items() if r["role"] == "plain")
    async with aiohttp.ClientSession() as s:
        for ip in websim.ips:  # the same Host header on any served IP gets the same page
            async with s.get(f"http://{ip}:{websim.port}/", headers={"Host": f"{host}:{websim.port}"}) as r:
                assert r.status == 200
                assert (await r.text()).count("<a ") >= len(m.pages[f"http://{host}:{websim.port}/"]["links"])
        async with s.get(f"http://{websim.ips[0]}:{websim.port}/", headers={"Host": "unknown.test"}) as r:
            assert r.status == 404
    with pytest.raises(OSError):  # never on the wildcard address or 127.0.0.1
        socket.create_connection(("127.0.0.1", websim.port), timeout=1).close()


def test_dns_server_answers_a_records_and_nxdomain(websim):
    ip, port = websim.dns_address
    m = websim.manifest
    table = read_hosts_file(websim.hosts_file)
    assert table == {h: rec["ip"] for h, rec in m.hosts.items()}
    for name in list(m.hosts)[:20]:
        asked = name.upper() if len(name) % 2 else name
        reply = DNSRecord.parse(DNSRecord.question(asked).send(ip, port, timeout=2))
        assert reply.header.rcode == RCODE.NOERROR
        assert [str(rr.rdata) for rr in reply.rr] == [m.hosts[name]["ip"]]
        assert reply.rr[0].ttl > 0
    for missing in ("nothere.test", m.meta["nxdomain_hosts"][0], "example.com"):
        reply = DNSRecord.parse(DNSRecord.question(missing).send(ip, port, timeout=2))
        assert reply.header.rcode == RCODE.NXDOMAIN
    some = next(iter(m.hosts))
    reply = DNSRecord.parse(DNSRecord.question(some, "AAAA").send(ip, port, timeout=2))
    assert reply.header.rcode == RCODE.NOERROR and not reply.rr
    # Garbage on the socket is dropped and the server keeps answering.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\x00garbage", (ip, port))
    reply = DNSRecord.parse(DNSRecord.question(some).send(ip, port, timeout=2))
    assert reply.q.qtype == QTYPE.A and reply.rr


async def test_robots_variety_agrees_with_protego(websim):
    """websim's ground truth (its own RFC 9309 matcher) against protego on every robots.txt served;
    the kinds made to trip a careless reader (BOM, a ``ray`` group) against protego as raycrawl
    corrects it (policies.robots), and the flaky one answers 503 once, then the file."""
    from raycrawl.policies.robots import RobotsRules
    from raycrawl.websim.robots import BROWSER_KINDS

    m = websim.manifest
    kinds_seen = set()
    async with session(websim) as s:
        for host, rec in m.hosts.items():
            if rec["fault"]:
                continue
            kinds_seen.add(rec["robots"])
            for _ in range(2 if rec["robots"] == "flaky_5xx" else 1):
                async with s.get(f"http://{host}:{m.port}/robots.txt", allow_redirects=True, max_redirects=5) as r:
                    status, raw = r.status, await r.read()
                    redirected = len(r.history) > 0
                    final_host = r.url.host
            body = raw.decode("utf-8", errors="replace")
            urls = [p["url"] for p in m.pages.values() if p["host"] == host]
            assert redirected == (rec["robots"] in ("redirect", "redirect_cross"))
            assert (final_host != host) == (rec["robots"] == "redirect_cross")
            if status >= 500:
                assert rec["robots"] == "error_5xx" and rec["rules"]["disallow_all"]
                assert not any(p["allowed"] for p in m.pages.values() if p["host"] == host)
                continue
            if status == 404:
                assert rec["robots"] == "missing"
                body = ""
            if rec["robots"] in BROWSER_KINDS:
                ours = RobotsRules.from_response(status, raw, "raycrawl", 0.0, 1.0)
                check, delay = (lambda u, ours=ours: ours.allowed(u)), ours.crawl_delay
                if rec["robots"] in ("bom_truncated", "ray_group"):  # plain protego misreads these
                    plain = Protego.parse(body)
                    assert any(plain.can_fetch(u, "raycrawl") != m.allowed(u) for u in urls), rec["robots"]
            else:
                parser = Protego.parse(body)
                check, delay = (lambda u, parser=parser: parser.can_fetch(u, "raycrawl")), parser.crawl_delay("raycrawl")
            for u in urls:
                assert check(u) == m.allowed(u) == m.pages[u]["allowed"], (rec["robots"], u)
            assert (delay or None) == rec["crawl_delay"], host
    assert {"missing", "allow_all", "basic", "agent_groups", "agent_excluded", "wildcards", "error_5xx",
            "redirect", "garbage", *BROWSER_KINDS} <= kinds_seen
    assert any(rec["crawl_delay"] for rec in m.hosts.values())


async def test_redirect_chains_loops_and_cross_host(websim):
    m = websim.manifest
    chains = [p for p in m.pages.values() if any(lab.startswith("redirect_chain:") for lab in p["labels"])]
    heads = {p["url"].rsplit("/", 1)[0]: int(p["labels"][0].split(":")[1]) for p in chains}
    async with session(websim) as s:
        for prefix, length in heads.items():
            async with s.get(f"{prefix}/{length}", max_redirects=10) as r:
                assert r.status == 200 and len(r.history) == length
                assert all(h.status in (301, 302, 307, 308) for h in r.history)
                final = canonicalize(str(r.url))
                hops = f"{prefix}/1"
                assert final == m.pages[hops]["location"]
        loop = next(p for p in m.pages.values() if "redirect_loop" in p["labels"])
        with pytest.raises(aiohttp.TooManyRedirects):
            async with s.get(loop["url"], max_redirects=6):
                pass
        away = next(p for p in m.pages.values() if "redirect_cross_host" in p["labels"])
        async with s.get(away["url"], allow_redirects=False) as r:
            assert r.status == 301 and canonicalize(r.headers["Location"]) == away["location"]
            assert m.host_name(away["location"]) != away["host"]


async def test_error_statuses_and_resets(websim):
    m = websim.manifest
    async with session(websim) as s:
        for rec in pages_where(m, kind="error"):
            async with s.get(rec["url"]) as r:
                assert r.status == rec["status"] >= 500
                if r.status == 503:
                    assert r.headers["Retry-After"]
        for rec in pages_where(m, kind="reset"):
            with pytest.raises(aiohttp.ClientError):
                async with s.get(rec["url"]) as r:
                    await r.read()


async def test_slow_hang_and_dead_hosts(websim):
    m = websim.manifest
    slow = host_urls(m, lambda r: r["fault"] == "slow")[0]
    hang = host_urls(m, lambda r: r["fault"] == "hang")[0]
    dead = host_urls(m, lambda r: r["fault"] == "dead")[0]
    async with session(websim) as s:
        t = time.monotonic()
        async with s.get(slow + "/") as r:
            assert r.status == 200
        assert time.monotonic() - t >= SLOW_DELAY - 0.01  # (the suite's websim: tests/fault_crawl.py)
        with pytest.raises(asyncio.TimeoutError):
            async with session(websim, timeout=0.5) as quick, quick.get(hang + "/") as r:
                await r.read()
        with pytest.raises(aiohttp.ClientConnectorError):
            async with s.get(dead + "/") as r:
                pass
    assert m.hosts[m.host_name(dead)]["ip"] == m.meta["dead_ip"]
    # The hung request is logged with status 0 once the client went away.
    await asyncio.sleep(0.3)
    logged = [r for r in websim.requests() if r.host == m.host_name(hang) + f":{m.port}"]
    assert logged and logged[-1].status == 0 and logged[-1].end - logged[-1].start >= 0.4


async def test_oversized_pages_and_gzip_bomb(websim):
    m = websim.manifest
    async with session(websim, timeout=30) as s:
        for rec in pages_where(m, kind="oversized"):
            async with s.get(rec["url"]) as r:
                if "chunked" in rec["labels"]:
                    assert "Content-Length" not in r.headers
                else:
                    assert int(r.headers["Content-Length"]) > 10 * 1024 * 1024
                got = 0
                async for chunk in r.content.iter_chunked(1 << 16):
                    got += len(chunk)
                    if got > 11 * 1024 * 1024:
                        break  # a size-capped crawler stops reading here
                assert got > 10 * 1024 * 1024
        bomb = pages_where(m, kind="bomb")[0]
        async with s.get(bomb["url"]) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            raw = await r.read()
    inflated = zlib.decompressobj(31).decompress(raw, 64 * 1024 * 1024)
    assert len(inflated) == 64 * 1024 * 1024 and len(raw) < 1024 * 1024  # ratio > 64


async def test_charsets_malformed_and_binary_bodies(websim):
    m = websim.manifest
    charset_pages = [p for p in m.pages.values() if any(lab.startswith("charset:") for lab in p["labels"])]
    async with session(websim) as s:
        for rec in charset_pages:
            charset = next(lab.split(":")[1] for lab in rec["labels"] if lab.startswith("charset:"))
            async with s.get(rec["url"]) as r:
                body, ctype = await r.read(), r.headers["Content-Type"]
            if "charset_in_meta_only" in rec["labels"]:
                assert "charset" not in ctype and f'charset="{charset}"'.encode() in body
            else:
                assert ctype.endswith(f"charset={charset}")
            with pytest.raises(UnicodeDecodeError):
                body.decode("utf-8")
            decoded = body.decode(charset)
            assert any(not t.isascii() for t in text.tokens(text.visible_text(decoded)))
        for rec in pages_where(m, kind="binary"):
            async with s.get(rec["url"]) as r:
                assert r.headers["Content-Type"].startswith("text/html")
                body = await r.read()
            assert b"\0" in body or b"<html" not in body
        malformed = [p for p in m.pages.values() if "malformed" in p["labels"]]
        assert malformed
        async with s.get(malformed[0]["url"]) as r:
            html = await r.text()
        assert "</body>" not in html and "</html>" not in html
    assert charset_pages or m.meta["hosts"] < 50


async def test_traps_are_infinite(websim):
    m = websim.manifest
    trap_hosts = {rec["trap"]["kind"]: h for h, rec in m.hosts.items() if rec["trap"]}
    assert set(trap_hosts) == {"calendar", "repeat", "session"}
    from selectolax.lexbor import LexborHTMLParser

    def links(url, html):
        found = (canonicalize(a.attributes["href"], url) for a in LexborHTMLParser(html).css("a[href]"))
        return [u for u in found if u]

    async with session(websim) as s:
        for kind in ("calendar", "repeat"):
            host = trap_hosts[kind]
            trap = m.hosts[host]["trap"]
            home = f"http://{host}:{m.port}/"
            url = f"http://{host}:{m.port}{trap['entry']}"
            assert url in m.pages[home]["links"]
            seen = set()
            for _ in range(25):
                async with s.get(url) as r:
                    assert r.status == 200
                    html = await r.text()
                seen.add(url)
                nxt = [u for u in links(url, html) if u not in seen and u != home and u.startswith(f"http://{host}")]
                url = nxt[-1]
            assert len(seen) == 25
        host = trap_hosts["session"]
        page = next(p for p in m.pages.values() if p["host"] == host and p["links"])
        sids = []
        for sid in ("aaaa", "bbbb"):
            async with s.get(page["url"] + ("&" if "?" in page["url"] else "?") + f"sid={sid}") as r:
                assert r.status == 200
                sids.append(links(page["url"], await r.text()))
        assert sids[0] != sids[1]  # every visit mints new session ids: unbounded URLs
        for found in sids:  # without the session id, the links are the manifest's
            stripped = [re.sub(r"[?&]sid=[0-9a-f]+$", "", u) for u in found]
            assert list(dict.fromkeys(stripped)) == page["links"]


async def test_near_duplicates_over_http_match_the_manifest(websim):
    m = websim.manifest
    near = [c for c in m.clusters if c["kind"] in ("near", "near_miss")][:6]
    assert near

    def shingles(html):
        toks = text.tokens(text.visible_text(html))
        return {tuple(toks[i:i + 4]) for i in range(len(toks) - 3)}

    async with session(websim) as s:
        for c in near:
            sets = []
            for u in c["urls"]:
                async with s.get(u) as r:
                    sets.append(shingles(await r.text()))
            j = len(sets[0] & sets[1]) / len(sets[0] | sets[1])
            assert j == pytest.approx(c["jaccard"][1], abs=0.01)


async def test_epochs_on_the_same_port_keep_urls_and_change_content(tmp_path):
    from raycrawl.websim import Websim

    bodies, etags = [], {}
    with Websim(hosts=30, ips=2, seed=4, epoch=0, out_dir=tmp_path / "e0") as w0:
        port, m0 = w0.port, w0.manifest
        async with session(w0) as s:
            for u in [u for u, p in m0.pages.items() if m0.hosts[p["host"]]["fault"] is None
                      and p["kind"] in ("html", "pdf", "png", "error")][:200]:
                async with s.get(u, allow_redirects=False) as r:
                    bodies.append((u, r.status, await r.read()))
                    etags[u] = r.headers.get("ETag")
    with Websim(hosts=30, ips=2, seed=4, epoch=1, port=port, out_dir=tmp_path / "e1") as w1:
        m1 = w1.manifest
        assert w1.port == port and set(m0.pages) <= set(m1.pages)
        changed = same = 0
        async with session(w1) as s:
            for u, status, body in bodies:
                rec = m1.pages[u]
                async with s.get(u, allow_redirects=False) as r:
                    now = await r.read()
                    assert r.status == rec["status"]
                if rec["removed_in"] == 1:
                    assert status == 200 and r.status == 404
                elif 1 in rec["changed"]:
                    changed += 1
                    if rec["kind"] == "html":  # a re-crawl's conditional GET sees the change
                        assert r.headers["ETag"] != etags[u]
                    assert text.content_digest(text.visible_text(now)) != text.content_digest(text.visible_text(body)) \
                        or m1.pages[u]["links"] != m0.pages[u]["links"]
                elif rec["links"] == m0.pages[u]["links"] and rec["cluster"] is None:
                    same += 1
                    assert now == body
        assert changed > 5 and same > changed


async def test_aiodns_resolves_through_the_dns_server(websim):
    import aiodns

    ip, port = websim.dns_address
    m = websim.manifest
    resolver = aiodns.DNSResolver(nameservers=[f"{ip}:{port}"], timeout=2, tries=1)
    for name in list(m.hosts)[:10]:
        answer = await resolver.query_dns(name, "A")
        assert [a.data.addr for a in answer.answer] == [m.hosts[name]["ip"]]
    with pytest.raises(aiodns.error.DNSError):
        await resolver.query_dns(m.meta["nxdomain_hosts"][0], "A")


async def test_conditional_get_with_etag_and_last_modified(websim):
    from email.utils import parsedate_to_datetime

    m = websim.manifest
    url = m.seeds[0]
    async with session(websim) as s:
        async with s.get(url) as r:
            etag, modified, body = r.headers["ETag"], r.headers["Last-Modified"], await r.read()
        assert parsedate_to_datetime(modified).year == 2026
        async with s.get(url, headers={"If-None-Match": etag}) as r:
            assert r.status == 304 and await r.read() == b"" and r.headers["ETag"] == etag
        async with s.get(url, headers={"If-None-Match": '"stale"', "If-Modified-Since": modified}) as r:
            assert r.status == 200 and await r.read() == body  # If-None-Match wins
        async with s.get(url, headers={"If-Modified-Since": modified}) as r:
            assert r.status == 304
        async with s.get(url, headers={"If-Modified-Since": "Thu, 01 Jan 2015 00:00:00 GMT"}) as r:
            assert r.status == 200
        async with s.get(url, headers={"If-Modified-Since": "not a date"}) as r:
            assert r.status == 200
    logged = [r for r in websim.requests() if f"http://{r.host}{r.target}" == url]
    assert [r.status for r in logged[-6:]] == [200, 304, 200, 304, 200, 200]
    assert [r.bytes for r in logged[-6:]][1] == 0
