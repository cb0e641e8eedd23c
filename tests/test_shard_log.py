"""A shard's log (storage/shard_log.py): a checkpoint of a shard's files plus the log since give
back its owner's state exactly — the sieve's fingerprints, queues and offsets byte for byte."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from raycrawl.actors.frontier.sieve_shards import SieveShards
from raycrawl.storage import shard_log
from raycrawl.storage.shard_log import Enqueued, Flushed, Spilled


def test_entries_round_trip() -> None:
    entries = [shard_log.enqueued(["http://a.test/1", "http://a.test/2"], [0, 3]), shard_log.FLUSH,
               shard_log.enqueued([], []), shard_log.spilled("a.test", 120, ["/x", "/y?q=1"])]
    assert list(shard_log.parse(entries)) == [
        Enqueued(["http://a.test/1", "http://a.test/2"], [0, 3]), Flushed(), Enqueued([], []),
        Spilled("a.test", 120, b"/x\n/y?q=1\n")]


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_checkpoint_and_the_log_rebuild_the_shards_exactly(tmp_path) -> None:
    """An owner enqueues, flushes and is read from, with a checkpoint (a copy of its files) taken
    midway; another sieve opened on the checkpoint and fed the log from there holds the same
    files — so the offsets Redis keeps into its queues stay true — and reads the same URLs next."""
    rng = random.Random(7)
    log: dict[int, list[bytes]] = {}
    owner = SieveShards(tmp_path / "owner", range(64), batch_size=40,
                        on_log=lambda entries: [log.setdefault(s, []).extend(e) for s, e in entries.items()])
    urls = [f"http://h{rng.randrange(30)}.test/p{rng.randrange(200)}" for _ in range(600)]
    offsets: dict[int, int] = {}
    checkpoint, mark = None, {}
    for i in range(0, 600, 25):
        owner.enqueue(urls[i:i + 25], [rng.randrange(2) for _ in range(25)])
        if i % 100 == 50:
            _, offsets = owner.read(offsets, 30)  # flushes when the queues are read to their ends
        if i == 300:  # the checkpoint: the files as they are, and where each shard's log stands
            checkpoint = tmp_path / "checkpoint"
            shutil.copytree(tmp_path / "owner", checkpoint)
            mark = {s: len(e) for s, e in log.items()}
    taker = SieveShards(tmp_path / "checkpoint", [], batch_size=40)
    taker.take(range(64), replay={s: e[mark.get(s, 0):] for s, e in log.items()})
    assert files(tmp_path / "checkpoint") == files(tmp_path / "owner")
    (got, after), (want, want_after) = taker.read(offsets, 1000), owner.read(offsets, 1000)
    assert sorted(got) == sorted(want) and after == want_after  # (shards take turns from different starts)
    assert {s: taker.sieves[s].batch for s in range(64)} == {s: owner.sieves[s].batch for s in range(64)}
