"""A real DNS server for the in-vitro web: UDP on loopback, A records for the ``.test`` hosts.

Known names get their A record (TTL :data:`TTL`); AAAA and other types for known names get an
empty NOERROR answer (NODATA); any other name gets NXDOMAIN. Undecodable datagrams are dropped.
"""

from __future__ import annotations

import asyncio
import logging

from dnslib import QTYPE, RCODE, RR, A, DNSRecord

log = logging.getLogger(__name__)

TTL = 300


class DNSProtocol(asyncio.DatagramProtocol):
    def __init__(self, records: dict[str, str]) -> None:
        self.records = records  # lower-case name without trailing dot -> IPv4
        self.transport: asyncio.DatagramTransport | None = None
        self.queries = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            request = DNSRecord.parse(data)
        except Exception:  # any garbage on the socket: a real server drops it too
            log.debug("undecodable DNS datagram from %s", addr)
            return
        self.queries += 1
        reply = answer(request, self.records)
        assert self.transport is not None
        self.transport.sendto(reply.pack(), addr)


def answer(request: DNSRecord, records: dict[str, str]) -> DNSRecord:
    """The reply to ``request`` for the zone ``records``."""
    reply = request.reply()
    for q in request.questions:
        name = str(q.qname).rstrip(".").lower()
        ip = records.get(name)
        if ip is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif q.qtype in (QTYPE.A, QTYPE.ANY):
            reply.add_answer(RR(q.qname, QTYPE.A, rdata=A(ip), ttl=TTL))
    return reply


async def start_dns(records: dict[str, str], ip: str, port: int = 0) -> tuple[asyncio.DatagramTransport, DNSProtocol]:
    """Serve ``records`` on UDP ``ip:port`` (0 = any free port) in the running loop."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(lambda: DNSProtocol(records), local_addr=(ip, port))
    return transport, protocol  # type: ignore[return-value]


def hosts_file_text(records: dict[str, str]) -> str:
    """The zone in ``/etc/hosts`` format (one ``ip name`` line per host)."""
    return "".join(f"{ip}\t{name}\n" for name, ip in records.items())
