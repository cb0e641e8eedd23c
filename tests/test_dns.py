"""Resolver against a real DNS server (dnslib on a random loopback UDP port) and a hosts file."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from dnslib import CNAME, QTYPE, RCODE, RR, A, DNSError
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from raycrawl.actors.fetch.dns import Resolver, parse_dns_server, parse_hosts_file
from raycrawl.errors import UserError

ZONE = {f"h{i}.test": f"127.0.{i // 250}.{i % 250 + 1}" for i in range(300)}
BURST = {f"b{i}.test": f"127.1.{i // 250}.{i % 250 + 1}" for i in range(2500)}


class ZoneResolver(BaseResolver):
    """Answers A queries from ZONE, NXDOMAIN otherwise; counts queries per name; can stall."""

    def __init__(self) -> None:
        self.queries: dict[str, int] = {}
        self.lock = threading.Lock()
        self.stall: set[str] = set()
        self.delay: dict[str, float] = {}  # name → seconds before answering (server-side work)

    def resolve(self, request, handler):
        name = str(request.q.qname).rstrip(".").lower()
        with self.lock:
            self.queries[name] = self.queries.get(name, 0) + 1
        if name in self.stall:  # dnslib sends nothing (the client times out) and logs a DNSError quietly
            raise DNSError(f"stalled: {name}")
        if name in self.delay:
            time.sleep(self.delay[name])  # dnslib answers each query in its own thread  # dnslib sends nothing: the client times out
        reply = request.reply()
        if name == "alias.test" and request.q.qtype == QTYPE.A:  # CNAME chain answered in full
            reply.add_answer(RR(request.q.qname, QTYPE.CNAME, rdata=CNAME("h5.test."), ttl=0))
            reply.add_answer(RR("h5.test.", QTYPE.A, rdata=A(ZONE["h5.test"]), ttl=0))
        elif (name in ZONE or name in BURST) and request.q.qtype == QTYPE.A:
            addr = ZONE.get(name) or BURST[name]
            reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(addr), ttl=0))  # ttl 0: c-ares's own cache stays out
        elif name not in ZONE and name not in BURST and name != "alias.test":
            reply.header.rcode = RCODE.NXDOMAIN
        return reply


@pytest.fixture(scope="module")
def dns_server():
    zone = ZoneResolver()
    server = DNSServer(zone, port=0, address="127.0.0.1", logger=DNSLogger("-request,-reply,-truncated,-error,-recv,-send,-data"))
    server.start_thread()
    yield zone, server.server.server_address[1]
    server.stop()


async def test_answers_match_zone_and_cache(dns_server):
    zone, port = dns_server
    zone.queries.clear()
    # One try with a long timeout: on a loaded machine a retransmission would count as a second
    # query of the name, and what is checked here is the cache, not the retries.
    r = Resolver(dns_server=("127.0.0.1", port), timeout=20.0, tries=1)
    names = list(ZONE)
    answers = await r.resolve_many(names + ["missing.test", "H1.TEST.", "h2.test:8080"])
    assert {n: answers[n] for n in names} == ZONE
    assert answers["missing.test"] is None
    assert answers["H1.TEST."] == ZONE["h1.test"] and answers["h2.test:8080"] == ZONE["h2.test"]
    # second round: all from the cache, positive and negative
    again = await r.resolve_many(names + ["missing.test"])
    assert again == {**ZONE, "missing.test": None}
    assert all(zone.queries[n] == 1 for n in names) and zone.queries["missing.test"] == 1
    await r.close()


async def test_concurrent_lookups_share_one_query(dns_server):
    zone, port = dns_server
    zone.queries.clear()
    r = Resolver(dns_server=("127.0.0.1", port))
    out = await asyncio.gather(*(r.resolve("h7.test") for _ in range(50)))
    assert out == [ZONE["h7.test"]] * 50 and zone.queries["h7.test"] == 1
    await r.close()


async def test_ttls_expire(dns_server):
    zone, port = dns_server
    zone.queries.clear()
    r = Resolver(dns_server=("127.0.0.1", port), positive_ttl=0.2, negative_ttl=0.2)
    assert await r.resolve("h3.test") == ZONE["h3.test"] and await r.resolve("nx.test") is None
    await r.resolve("h3.test")
    await r.resolve("nx.test")
    assert zone.queries["h3.test"] == 1 and zone.queries["nx.test"] == 1
    await asyncio.sleep(0.3)
    await r.resolve("h3.test")
    await r.resolve("nx.test")
    assert zone.queries["h3.test"] == 2 and zone.queries["nx.test"] == 2
    await r.close()


async def test_timeout_is_negative_answer(dns_server):
    zone, port = dns_server
    zone.stall.add("slow.test")
    r = Resolver(dns_server=("127.0.0.1", port), timeout=0.3, tries=1)
    try:
        assert await asyncio.wait_for(r.resolve("slow.test"), 5) is None
        assert r.cached("slow.test") == (True, None)
    finally:
        zone.stall.discard("slow.test")
        await r.close()


async def test_configured_timeout_holds_after_fast_answers(dns_server):
    """c-ares ≥ 1.32 replaces the per-try timeout with 5× the server's average latency (≥ 250 ms)
    once it has answered three queries: after fast answers, one answer taking 1.2 s failed a lookup
    configured for 2 s × 2 in half a second. The lookup must get the time it was configured for."""
    zone, port = dns_server
    zone.delay["h250.test"] = 1.2
    r = Resolver(dns_server=("127.0.0.1", port), timeout=2.0, tries=2)
    try:
        assert await r.resolve_many([f"h{i}.test" for i in range(20)]) == {f"h{i}.test": ZONE[f"h{i}.test"]
                                                                            for i in range(20)}
        started = time.monotonic()
        assert await r.resolve("h250.test") == ZONE["h250.test"]
        assert r.failures == 0 and time.monotonic() - started >= 1.2
    finally:
        zone.delay.pop("h250.test")
        await r.close()


async def test_deadline_is_timeout_times_tries(dns_server):
    """A server that never answers: the lookup ends at its deadline, not later."""
    zone, port = dns_server
    zone.stall.add("never.test")
    r = Resolver(dns_server=("127.0.0.1", port), timeout=0.5, tries=2)
    try:
        started = time.monotonic()
        assert await r.resolve("never.test") is None
        assert 0.9 <= time.monotonic() - started < 3.0
    finally:
        zone.stall.discard("never.test")
        await r.close()


async def test_ip_literals_not_queried(dns_server):
    zone, port = dns_server
    zone.queries.clear()
    r = Resolver(dns_server=("127.0.0.1", port))
    assert await r.resolve("127.0.0.9") == "127.0.0.9"
    assert await r.resolve("[::1]") is None  # IPv6 is never dialed
    assert zone.queries == {}
    await r.close()


async def test_hosts_file_only(tmp_path, dns_server):
    zone, _ = dns_server
    zone.queries.clear()
    hosts = tmp_path / "hosts"
    hosts.write_text("# websim\n127.0.0.2  a.test www.a.test  # trailing comment\n\n127.0.0.3 B.test\n::1 v6.test\n"
                     "127.0.0.4 a.test\n")
    r = Resolver(hosts_file=str(hosts))
    assert await r.resolve_many(["a.test", "www.a.test", "b.test", "v6.test", "h1.test"]) == {
        "a.test": "127.0.0.2", "www.a.test": "127.0.0.2", "b.test": "127.0.0.3", "v6.test": None, "h1.test": None}
    assert zone.queries == {}  # nothing went to DNS


def test_bad_inputs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        parse_hosts_file(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.write_text("127.0.0.1 ok.test\nnot-an-ip x.test\n")
    with pytest.raises(UserError, match=":2:"):
        parse_hosts_file(bad)
    lonely = tmp_path / "lonely"
    lonely.write_text("127.0.0.1\n")
    with pytest.raises(UserError):
        Resolver(hosts_file=str(lonely))
    assert parse_dns_server("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert parse_dns_server("127.0.0.1") == ("127.0.0.1", 53)
    for spec in ("localhost:53", "127.0.0.1:0", "127.0.0.1:x", "1.2.3.4:70000"):
        with pytest.raises(UserError):
            parse_dns_server(spec)


async def test_cname_chain(dns_server):
    _, port = dns_server
    r = Resolver(dns_server=("127.0.0.1", port))
    assert await r.resolve("alias.test") == ZONE["h5.test"]
    await r.close()


async def test_burst_of_lookups_does_not_overflow_the_server(dns_server):
    """Thousands of names at once (a crawl's first distributor step): all must resolve, which they
    don't if every query is sent at the same moment (the server's UDP buffer overflows)."""
    _, port = dns_server
    # (generous per-try timeout: the suite runs on loaded machines; overflow loses answers, not time)
    r = Resolver(dns_server=("127.0.0.1", port), timeout=5, tries=2)
    try:
        answers = await r.resolve_many(list(BURST))
    finally:
        await r.close()
    assert answers == BURST
