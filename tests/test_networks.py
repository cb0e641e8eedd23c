"""Network policy: the default refuses every non-public address; --allow-networks opens exactly its CIDRs."""

from __future__ import annotations

import ipaddress
import random

import pytest

from raycrawl.errors import UserError
from raycrawl.policies import networks
from raycrawl.policies.networks import NetworkPolicy

# Special-purpose ranges (IANA IPv4/IPv6 special-purpose registries) that must never be dialed by default.
FORBIDDEN = ["127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.1.2", "172.16.0.1", "172.31.255.255", "192.168.1.1",
             "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.254", "224.0.0.1", "239.255.255.250",
             "240.0.0.1", "255.255.255.255", "0.0.0.0", "0.1.2.3", "192.0.2.5", "198.51.100.7", "203.0.113.9",
             "198.18.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1",
             "::ffff:10.0.0.1", "2001:db8::1", "not-an-ip", "", "[::1]"]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "151.101.1.69", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


def test_default_is_public_unicast_only():
    policy = NetworkPolicy()
    assert [ip for ip in FORBIDDEN if policy.allows(ip)] == []
    assert all(policy.allows(ip) for ip in PUBLIC)


def test_default_agrees_with_ipaddress_on_random_ipv4(monkeypatch):
    """Independent check: is_global minus multicast and CGNAT, per the stdlib's IANA tables; asked
    twice, so the second answer comes from the remembered decisions (kept small here, so they are
    also dropped and made again)."""
    monkeypatch.setattr(networks, "_REMEMBERED", 1000)
    rng = random.Random(5)
    policy = NetworkPolicy(None)
    cgnat = ipaddress.ip_network("100.64.0.0/10")
    addrs = [ipaddress.IPv4Address(rng.getrandbits(32)) for _ in range(20000)]
    for addr in addrs + addrs[::-1] + addrs[:500]:
        expected = addr.is_global and not addr.is_multicast and addr not in cgnat
        assert policy.allows(str(addr)) == expected, addr
    assert len(policy._decided) <= 1000


def test_loopback_refused_by_default_allowed_when_configured():
    assert not NetworkPolicy().allows("127.0.0.1")
    only_lo = NetworkPolicy("127.0.0.0/8")
    assert only_lo.allows("127.0.0.1") and only_lo.allows("127.3.2.1")
    assert not only_lo.allows("8.8.8.8")  # a list replaces the default: outside it, nothing
    assert not only_lo.allows("10.0.0.1") and not only_lo.allows("::1")
    both = NetworkPolicy("public, 127.0.0.1/32")
    assert both.allows("127.0.0.1") and both.allows("8.8.8.8") and not both.allows("127.0.0.2")
    assert NetworkPolicy(["10.1.0.0/16", "::1/128"]).allows("::1")
    assert NetworkPolicy(["10.1.0.0/16"]).allows("::ffff:10.1.2.3")  # mapped addresses are checked as IPv4


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "banana", "127.0.0.1/8/8", "1.2.3", "::1/129"])
def test_bad_cidr_is_user_error(bad):
    with pytest.raises(UserError, match="allow-networks"):
        NetworkPolicy(f"127.0.0.0/8,{bad}")
