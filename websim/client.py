"""Client-side helpers for talking to websim from tests and benchmarks (not the crawler's fetcher).

:class:`HostsResolver` resolves names from a websim ``hosts`` file for aiohttp, so a plain
``aiohttp.ClientSession`` can fetch ``http://name.test:PORT/...`` URLs. The crawler resolves
through the real DNS server instead (``aiodns.DNSResolver(nameservers=[f"{ip}:{port}"])``).
"""

from __future__ import annotations

import socket
from pathlib import Path

from aiohttp.abc import AbstractResolver, ResolveResult


def read_hosts_file(path: str | Path) -> dict[str, str]:
    """name -> IPv4 from an ``/etc/hosts``-format file."""
    out: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2:
            for name in parts[1:]:
                out[name.lower()] = parts[0]
    return out


class HostsResolver(AbstractResolver):
    """aiohttp resolver backed by a hosts file; unknown names raise OSError like a failed lookup."""

    def __init__(self, hosts: str | Path | dict[str, str]) -> None:
        self.table = dict(hosts) if isinstance(hosts, dict) else read_hosts_file(hosts)

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        ip = self.table.get(host.lower().rstrip("."))
        if ip is None:
            raise OSError(f"{host}: not in the hosts file")
        return [ResolveResult(hostname=host, host=ip, port=port, family=socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST)]

    async def close(self) -> None:
        return None
