"""The sieve: each URL out once, in first-seen order, across flushes, restarts and kill -9."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import raycrawl.storage.sieve_store as sieve_store
from raycrawl.actors.frontier.sieve import Sieve


def drain(sieve: Sieve, offset: int = 0, n: int = 97) -> tuple[list[str], int]:
    out: list[str] = []
    while True:
        urls, offset = sieve.read(offset, n)
        if not urls:
            return out, offset
        out.extend(urls)


def random_stream(rng: random.Random, distinct: int, total: int) -> list[str]:
    return [f"http://h{rng.randrange(50)}.test/p{rng.randrange(distinct)}" for _ in range(total)]


def test_first_seen_order_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sieve_store, "CHUNK", 64)  # exercise the chunked merge on a small store
    rng = random.Random(7)
    stream = random_stream(rng, 3000, 20_000)
    sieve = Sieve(tmp_path, batch_size=500, cache_size=100)
    out: list[str] = []
    offset = 0
    for i in range(0, len(stream), 333):
        sieve.enqueue(stream[i : i + 333])
        got, offset = sieve.read(offset, rng.randrange(1, 200))
        out.extend(got)
    rest, offset = drain(sieve, offset)
    out.extend(rest)
    assert out == list(dict.fromkeys(stream))  # independent: Python's insertion-ordered dedup
    assert sieve.exhausted(offset)
    stored = np.concatenate(list(sieve.store.iter_fps()))
    assert np.all(stored[1:] > stored[:-1]) and len(stored) == len(out)


def test_restart_replays_pending_and_drops_uncommitted(tmp_path: Path) -> None:
    sieve = Sieve(tmp_path, batch_size=10_000)
    sieve.enqueue([f"http://a.test/{i}" for i in range(100)])
    first, off = drain(sieve)
    assert len(first) == 100
    sieve.enqueue([f"http://a.test/{i}" for i in range(50, 150)])  # 50 new, in the pending log only
    # A crash in the middle of a flush: merge written, commit never made.
    fps = np.unique(np.array([1, 2, 3], dtype=np.uint64))
    sieve.store.merge(fps)
    with open(tmp_path / "queue", "ab") as f:
        f.write(b"http://ghost.test/never-committed\n")
    # no close(): the process "died"
    again = Sieve(tmp_path, batch_size=10_000)
    rest, _ = drain(again, off)
    assert rest == [f"http://a.test/{i}" for i in range(100, 150)]


CHILD = r"""
import sys
from raycrawl.actors.frontier.sieve import Sieve
s = Sieve(sys.argv[1], batch_size=700, cache_size=50)
i = 0
while True:
    urls = [f"http://k{j % 13}.test/{j}" for j in range(i, i + 50)] + [f"http://k0.test/{j}" for j in range(0, i, 7)][:20]
    s.enqueue(urls)
    print(i + 50, flush=True)  # everything below this index is durably enqueued
    i += 50
"""


def test_kill9_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    deadline = time.monotonic() + 60
    acked = 0
    while acked < 1500 and time.monotonic() < deadline:  # let it flush (batch 700) at least twice
        acked = int(proc.stdout.readline() or 0)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acked = max([acked] + [int(x) for x in out.split()])
    assert acked >= 1500, "the child should have flushed at least twice"
    sieve = Sieve(tmp_path, batch_size=700)
    urls, _ = drain(sieve)
    assert len(urls) == len(set(urls)), "a URL came out twice"
    expected = {f"http://k{j % 13}.test/{j}" for j in range(acked)}
    assert expected <= set(urls), "a durably enqueued URL was lost"


def test_sieve_shards_move_between_agents(tmp_path) -> None:
    """A shard given by one agent and taken by another keeps its seen-set, its queued URLs and its
    not-yet-merged batch: each URL still comes out once, at the new owner."""
    from raycrawl.actors.frontier.sieve_shards import SieveShards
    from raycrawl.policies.assignment import SHARDS, shard_of
    from raycrawl.servers import server_of

    hosts = [f"http://h{i}.test" for i in range(40)]
    mine = {shard_of(server_of(h + "/")) for h in hosts[:20]}
    a = SieveShards(tmp_path, range(SHARDS), batch_size=1000)
    b = SieveShards(tmp_path, [], batch_size=1000)
    first = [f"{h}/{j}" for h in hosts for j in range(5)]
    a.enqueue(first[:100])
    offsets: dict[int, int] = {}
    got, new = a.read(offsets, 30)  # flushes the first 100, reads 30
    offsets.update(new)
    a.enqueue(first[100:])  # batched, not merged
    a.give(mine)
    b.take(mine)
    with pytest.raises(ValueError):
        a.enqueue([f"{hosts[0]}/x"])
    moved = [u for u in first if shard_of(server_of(u)) in mine]
    b.enqueue(moved)  # all seen already: none comes out again
    b.enqueue([f"{hosts[0]}/fresh"])
    out = list(got)
    for sieve in (a, b):
        while True:
            urls, new = sieve.read(offsets, 17)
            if not urls:
                break
            offsets.update(new)
            out += urls
        assert sieve.exhausted(offsets)
    assert sorted(out) == sorted([*first, f"{hosts[0]}/fresh"])


def test_a_first_flush_that_never_committed_is_not_damage(tmp_path: Path, monkeypatch) -> None:
    """A full disk (or a kill) during a shard's very first flush leaves queue bytes and fingerprints
    but no meta.json, next to pending.0: the consistency check must not call that a lost commit
    point (a resume was refused so once), and reopening replays every URL exactly once."""
    from raycrawl.storage.crawl_check import check_sieve

    shard = tmp_path / "sieve" / "07"
    sieve = Sieve(shard, batch_size=10_000)
    urls = [f"http://a.test/{i}" for i in range(40)]
    sieve.enqueue(urls)

    def disk_full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sieve.store.files, "write_meta", disk_full)
    with pytest.raises(OSError):
        sieve.flush()
    monkeypatch.undo()
    assert (shard / "queue").stat().st_size > 0 and not (shard / "meta.json").exists()
    assert check_sieve(tmp_path / "sieve") == []
    sieve.store.close()
    again = Sieve(shard, batch_size=10_000)
    got, _ = drain(again)
    assert got == urls
    # a shard that did commit and then lost its meta.json is still damage
    again.store.close()
    (shard / "meta.json").unlink()
    assert [d.path.name for d in check_sieve(tmp_path / "sieve")] == ["meta.json"]
