"""Network safety: which IP addresses the crawler may ever connect to (``--allow-networks``).

A crawler that follows arbitrary links must not be turned into a probe of its own network
(SSRF): a public page linking to ``http://169.254.169.254/`` or ``http://10.0.0.1/admin`` must
never be fetched. The check is on the *address dialed*, after DNS, so a public name that
resolves to a private address is refused too.

Default (no CIDRs given): public unicast only — no private (RFC 1918 / ULA), loopback,
link-local (which includes the cloud metadata address 169.254.169.254), CGNAT (100.64/10),
multicast, reserved, unspecified, documentation or benchmarking ranges.

With CIDRs: exactly the addresses inside one of them. The pseudo-CIDR ``public`` stands for the
default set, so ``public,127.0.0.0/8`` means "the public Internet plus loopback".
"""

from __future__ import annotations

import ipaddress
import logging

from raycrawl.errors import UserError
from raycrawl.proxies import is_proxy_resolved

log = logging.getLogger(__name__)

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_METADATA = ipaddress.ip_address("169.254.169.254")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Decisions remembered per policy: a crawl dials few distinct addresses (hosts share IPs), and
# parsing one with ipaddress costs ~10 µs, 7 % of the fetch actor's CPU when done per request.
_REMEMBERED = 1 << 16


def is_public_unicast(addr: IPAddress) -> bool:
    """True for a globally routable unicast address (the default allow-list)."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if (
        addr.is_private
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
        or addr == _METADATA
    ):
        return False
    if isinstance(addr, ipaddress.IPv4Address) and addr in _CGNAT:
        return False
    return addr.is_global


class NetworkPolicy:
    """The set of addresses the fetcher may connect to.

    ``cidrs``: None/"" (public unicast only), a comma-separated string, or a list of CIDRs /
    single addresses / the word ``public``. A malformed entry raises :class:`UserError`.
    """

    def __init__(self, cidrs: str | list[str] | None = None) -> None:
        if isinstance(cidrs, str):
            cidrs = [c for c in (part.strip() for part in cidrs.split(",")) if c]
        self.public = not cidrs  # the default
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for cidr in cidrs or []:
            if cidr.lower() == "public":
                self.public = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(cidr, strict=False))
            except ValueError as e:
                raise UserError(f"--allow-networks: {cidr!r} is not a CIDR or IP address ({e})") from None
        self._decided: dict[str, bool] = {}

    def allows(self, ip: str) -> bool:
        """True iff ``ip`` (an IPv4/IPv6 literal) may be connected to. Garbage is refused; the
        placeholder of a host a socks5h proxy resolves is let through (core/proxies.py)."""
        decided = self._decided.get(ip)
        if decided is None:
            if len(self._decided) >= _REMEMBERED:
                self._decided.clear()
            decided = self._decided[ip] = self._allows(ip)
        return decided

    def _allows(self, ip: str) -> bool:
        if is_proxy_resolved(ip):
            return True  # only the socks5h proxy knows where the name goes (core/proxies.py)
        try:
            addr = ipaddress.ip_address(ip.strip("[]"))
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            # ::ffff:127.0.0.1 is 127.0.0.1 on the wire.
            addr = addr.ipv4_mapped
        if self.public and is_public_unicast(addr):
            return True
        return any(addr.version == net.version and addr in net for net in self.networks)

    def describe(self) -> str:
        parts = (["public"] if self.public else []) + [str(n) for n in self.networks]
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"NetworkPolicy({self.describe()!r})"
