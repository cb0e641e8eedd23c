"""The duplicate stores on disk (storage/dedup_store.py): claims, durability, checks, sharding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from raycrawl.actors.visit.duplicates import ShardedDuplicates, ask_local
from raycrawl.policies.assignment import SHARDS
from raycrawl.storage.dedup_store import (
    FILE,
    DedupShard,
    DedupShards,
    DedupStoreError,
    shard_of_key,
    signed64,
)


def owner(url: str) -> str:
    return json.dumps([url, "2026-01-01T00:00:00Z", "sha1:X"])


def test_the_first_claim_owns_a_digest_in_every_shard(tmp_path):
    dups = ShardedDuplicates(ask_local(DedupShards(tmp_path, range(SHARDS))))
    digests = [bytes([i]) * 16 for i in range(200)]  # spread over the shards
    assert len({shard_of_key(d, SHARDS) for d in digests}) > 32
    first = dups.claim_digests([(d, owner(f"http://a.test/{i}")) for i, d in enumerate(digests)])
    assert first == [owner(f"http://a.test/{i}") for i in range(200)]
    # Later claims, and a repeat within one batch, get the first claim's owner.
    again = dups.claim_digests([(digests[5], owner("http://b.test/")), (bytes([255]) * 16, owner("http://c.test/")),
                                (bytes([255]) * 16, owner("http://d.test/"))])
    assert again == [owner("http://a.test/5"), owner("http://c.test/"), owner("http://c.test/")]


def test_claims_survive_a_kill_9_of_their_writer(tmp_path):
    """A claim is in the file when the call returns (the crawl commits only after it)."""
    code = f"""
import os, signal, sys
from raycrawl.storage.dedup_store import DedupShard
shard = DedupShard({str(tmp_path / FILE)!r})
shard.claim([(bytes([i]) * 16, "owner %d" % i) for i in range(50)])
print("claimed", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and "claimed" in proc.stdout, proc.stderr
    shard = DedupShard(tmp_path / FILE)
    assert shard.claim([(bytes([7]) * 16, "late")]) == ["owner 7"]
    assert shard.counts()["digest"] == 50
    assert shard.quick_check() == "ok"


def test_band_keys_keep_all_64_bits_and_their_first_writer(tmp_path):
    shard = DedupShard(tmp_path / FILE)
    keys = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
    shard.add([(1, "http://r.test/", b"\x01" * 4)], [(k, 1) for k in keys])
    shard.add([(2, "http://s.test/", b"\x02" * 4)], [(k, 2) for k in keys])
    assert shard.bands(keys + [12345]) == dict.fromkeys(keys, 1)
    assert shard.reps([1, 2, 3]) == {1: (b"\x01" * 4, "http://r.test/"), 2: (b"\x02" * 4, "http://s.test/")}
    assert signed64((1 << 64) - 1) == -1


def test_a_damaged_store_is_one_clear_error(tmp_path):
    path = tmp_path / "00" / FILE
    path.parent.mkdir()
    path.write_bytes(b"this is not a database" * 100)
    stores = DedupShards(tmp_path, [0])  # opened at first use
    with pytest.raises(DedupStoreError, match="unreadable"):
        stores.claim({0: [(bytes(16), owner("http://a.test/"))]})


def test_memory_of_an_open_store_does_not_grow_with_its_rows(tmp_path):
    """The page cache is capped: a shard's writer holds ~CACHE_KIB whatever the rows (RSS measured
    in a child process, which writes 200k claims)."""
    code = f"""
import resource
from raycrawl.storage.dedup_store import DedupShard
shard = DedupShard({str(tmp_path / FILE)!r})
marks = []
for b in range(20):
    shard.claim([((b * 10_000 + i).to_bytes(16, "little"), "http://h%d.test/%d" % (b, i)) for i in range(10_000)])
    marks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(marks[4], marks[-1])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ})
    early, late = map(int, out.stdout.split())
    assert late - early < 8 * 1024, (early, late)  # KiB: under 8 MiB more for 4× the rows
    assert (tmp_path / FILE).stat().st_size > 200_000 * 16  # the rows are on disk, not in memory


def test_disk_per_representative(tmp_path):
    """A representative costs its 512-byte sketch, its URL and 16 band keys, plus B-tree overheads."""
    import random

    rng = random.Random(3)
    shard = DedupShard(tmp_path / FILE)
    n = 5_000
    for b in range(0, n, 500):
        ids = range(b + 1, b + 501)
        shard.add([(i, f"http://host{i % 97}.test/page/{i}", rng.randbytes(512)) for i in ids],
                  [(rng.getrandbits(64), i) for i in ids for _ in range(16)])
    shard.close()
    per_rep = sum(p.stat().st_size for p in tmp_path.glob(FILE + "*")) / n
    assert 512 + 16 * 9 < per_rep < 1536, per_rep


def test_raycrawl_check_finds_and_repairs_a_damaged_store(tmp_path):
    from raycrawl.storage.crawl_check import check_sieve, repair

    stores = DedupShards(tmp_path, [3, 4])
    stores.claim({3: [(bytes(16), owner("http://a.test/"))], 4: [(bytes([4]) * 16, owner("http://b.test/"))]})
    stores.close()
    assert check_sieve(tmp_path) == []
    bad = tmp_path / "04" / FILE
    bad.write_bytes(b"\0" * 100 + b"garbage" * 1000)
    damages = check_sieve(tmp_path)
    assert [d.path for d in damages] == [bad] and "starts it empty" in damages[0].repair
    assert repair(damages) == [f"{bad}: started empty"]
    assert check_sieve(tmp_path) == []
    stores = DedupShards(tmp_path, [3, 4])  # the good shard kept its claim
    assert stores.claim({3: [(bytes(16), owner("http://b.test/"))]}) == {3: [owner("http://a.test/")]}
