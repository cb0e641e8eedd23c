from collections import Counter

import pytest

from raycrawl.policies.assignment import ConsistentHash

HOSTS = [f"http://h{i}.example.test" for i in range(20_000)]


def test_shares_are_balanced():
    ring = ConsistentHash(["a0", "a1", "a2"])
    shares = Counter(ring.owner(h) for h in HOSTS)
    mean = len(HOSTS) / 3
    assert max(abs(c - mean) / mean for c in shares.values()) < 0.15


def test_join_moves_only_hosts_to_the_new_agent():
    ring = ConsistentHash(["a0", "a1"])
    before = {h: ring.owner(h) for h in HOSTS}
    after_ring = ring.with_agent("a2")
    moved = [h for h in HOSTS if after_ring.owner(h) != before[h]]
    assert all(after_ring.owner(h) == "a2" for h in moved)
    # About a third of the hosts move to the newcomer, not more.
    assert 0.2 < len(moved) / len(HOSTS) < 0.45


def test_leave_moves_only_the_leavers_hosts():
    ring = ConsistentHash(["a0", "a1", "a2"])
    before = {h: ring.owner(h) for h in HOSTS}
    smaller = ring.without_agent("a1")
    for h in HOSTS:
        if before[h] != "a1":
            assert smaller.owner(h) == before[h]
        else:
            assert smaller.owner(h) in ("a0", "a2")


def test_partition_and_determinism():
    ring1, ring2 = ConsistentHash(["x", "y"]), ConsistentHash(["y", "x"])
    assert ring1.partition(HOSTS[:500]) == ring2.partition(HOSTS[:500])
    with pytest.raises(ValueError):
        ConsistentHash([])


def test_shard_assignment_is_balanced_and_moves_little():
    from raycrawl.policies.assignment import SHARDS, assign_shards

    two = assign_shards(["a0", "a1"])
    assert sorted(Counter(two.values()).values()) == [SHARDS // 2, SHARDS // 2]
    three = assign_shards(["a0", "a1", "a2"], previous=two)
    loads = Counter(three.values())
    assert max(loads.values()) <= -(-SHARDS // 3) and min(loads.values()) >= SHARDS - 2 * -(-SHARDS // 3)
    # A join moves shards only to the newcomer; a leave only the leaver's.
    assert all(three[s] == "a2" for s in range(SHARDS) if three[s] != two[s])
    back = assign_shards(["a0", "a2"], previous=three)
    assert all(three[s] == "a1" for s in range(SHARDS) if back[s] != three[s])
    assert assign_shards(["a1", "a0"]) == two  # no coordinator needed: every agent computes the same map
