"""What a commit vouches for is on disk before it (core/durable.py): Redis fsyncs each commit
(WAITAOF), so the writers whose calls the agent waits for before committing — the store writer's
WARC and link records, the summary writer's spill — must have fsynced every byte of the call, and
the directory of every file they made, when the call returns. Checked by watching the real
``os.fsync`` calls (they still run): which file, and how long it was when synced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raycrawl.actors.visit.store_writer import StoreItem, StoreWriter
from raycrawl.actors.visit.summary_writer import SummaryWriter
from raycrawl.exchange import FetchResult
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import LinkRecord, iter_link_records
from raycrawl.storage.warc import iter_records, warc_files


@pytest.fixture
def synced(monkeypatch):
    """Path → its size at its last fsync (directories: size 0), for every fsync from now on."""
    seen: dict[Path, int] = {}
    real = os.fsync

    def watching(fd: int) -> None:
        real(fd)
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        seen[path] = 0 if path.is_dir() else os.fstat(fd).st_size

    monkeypatch.setattr(os, "fsync", watching)
    return seen


def page(i: int) -> FetchResult:
    body = f"<html><body>page {i} {os.urandom(600).hex()}</body></html>".encode()
    return FetchResult(url=f"http://h{i % 3}.test/p{i}", ip="127.0.0.1", status=200, body=body, ctype="text/html",
                       started=1.7e9, ended=1.7e9 + 0.01, status_line="HTTP/1.1 200 OK",
                       raw_headers=[(b"Content-Type", b"text/html")], http_version="1.1")


def every_file(root: Path) -> dict[Path, int]:
    return {p.resolve(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_store_writer_returns_with_its_batch_on_disk(tmp_path, synced):
    # Files of ~4 KB: the batches rotate WARC files mid-call, and the file a rotation closes must
    # be on disk too, not only the one the call ends in.
    store = StoreWriter(tmp_path, "agent0", max_file_bytes=4096)
    for start in (0, 7, 14):
        synced.clear()
        before = every_file(tmp_path)
        items = [StoreItem(page(i), None, LinkRecord(url=page(i).url, status=200, ctype="text/html")) for i in range(start, start + 7)]
        store.write_batch(items)
        grown = {p: size for p, size in every_file(tmp_path).items() if before.get(p) != size}
        assert any(p.name.endswith(".warc.gz") for p in grown) and any("links" in p.parts for p in grown)
        assert {p: synced.get(p) for p in grown} == grown  # every byte written by the call, fsynced
        made = {p.parent for p in grown if p not in before}
        assert made and made <= set(synced)  # and the directories of the files it made
    store.close()
    assert len(warc_files(layout(tmp_path).warc)) > 3  # (rotations happened)
    assert len(list(iter_records(layout(tmp_path).warc))) == 21 and len(list(iter_link_records(tmp_path))) == 21


def test_summary_spill_is_on_disk_when_flush_returns(tmp_path, synced):
    writer = SummaryWriter(tmp_path, "agent0", batch=1000)
    writer.add_pages([(f"http://a.test/{i}", f"words of page {i} about crawling") for i in range(10)])
    assert not synced  # (nothing written yet: the batch is not full)
    writer.flush()
    spill = writer.spill.path.resolve()
    assert synced[spill] == spill.stat().st_size > 0 and synced.get(spill.parent) == 0


def grown_since(root: Path, before: dict[Path, int]) -> dict[Path, int]:
    """Files made or changed since ``before`` (an empty new file has only a name to sync)."""
    return {p: size for p, size in every_file(root).items() if before.get(p) != size}


def all_synced(grown: dict[Path, int], before: dict[Path, int], synced: dict[Path, int]) -> bool:
    """Every byte of ``grown`` fsynced (a file replaced atomically: as its ``.tmp`` before the
    rename), and the directory of every file made."""
    def at_sync(p: Path) -> int | None:
        return synced.get(p, synced.get(p.with_name(p.name + ".tmp")))

    return ({p: at_sync(p) for p, n in grown.items() if n} == {p: n for p, n in grown.items() if n}
            and {p.parent for p in grown if p not in before} <= set(synced))


def test_sieve_acknowledges_links_and_flushes_on_disk(tmp_path, synced):
    """The frontier's half of a commit: links the sieve acknowledged (a batch is committed in Redis
    only after their owners' sieves did) are in fsynced pending logs, and a flush's queues,
    fingerprints and commit point are on disk before a reader gets offsets into them (offsets that
    Redis keeps): a machine crash takes back nothing Redis names."""
    from raycrawl.actors.frontier.sieve_shards import SieveShards
    from raycrawl.policies.assignment import SHARDS

    root = tmp_path / "sieve"
    shards = SieveShards(root, range(SHARDS), batch_size=50)
    assert {root} | {root / f"{s:02d}" for s in range(SHARDS)} <= {p.resolve() for p, n in synced.items() if n == 0} | {root}
    for start in (0, 30, 60):  # the second call fills the batch: a flush inside the enqueue
        synced.clear()
        before = every_file(tmp_path)
        shards.enqueue([f"http://h{i % 7}.test/p{i}" for i in range(start, start + 30)])
        grown = grown_since(tmp_path, before)
        assert grown and all_synced(grown, before, synced)
        if start == 30:
            assert {p.name.split(".")[0] for p in grown} >= {"queue", "fps", "meta", "pending"}
            assert {p.parent for p in grown} <= set(synced)  # the meta.json rename
    urls, offsets = shards.read({}, 1000)
    assert len(urls) == 60  # (the first flush's)
    shards.enqueue([f"http://h{i % 7}.test/q{i}" for i in range(10)])
    synced.clear()
    before = every_file(tmp_path)
    urls, offsets = shards.read(offsets, 1000)  # the queues are read to their ends: a flush first
    assert len(urls) == 40
    grown = grown_since(tmp_path, before)
    assert {p.name.split(".")[0] for p in grown} >= {"queue", "fps", "meta"} and all_synced(grown, before, synced)
    shards.close()


def test_virtual_queue_spills_are_on_disk_before_redis_names_them(tmp_path, synced, redis_url):
    import redis

    from raycrawl.actors.frontier.virtualizer import Virtualizer
    from raycrawl.storage.redis_frontier import RedisFrontier

    f = RedisFrontier(redis.Redis.from_url(redis_url), "dur:")
    virt = Virtualizer(tmp_path / "virtualizer", f, budget=4)
    with f.r.pipeline(transaction=True) as pipe:
        pipe.multi()
        virt.spill("a.test", ["/1", "/2"], pipe, end=0)
        virt.spill("b.test", ["/3"], pipe, end=0)
        assert not synced
        virt.sync()
        files = every_file(tmp_path / "virtualizer")
        assert len(files) == 2 and {p: synced.get(p) for p in files} == files
        assert (tmp_path / "virtualizer").resolve() in synced
        pipe.execute()
    synced.clear()
    virt.sync()  # nothing spilled since: nothing to sync
    assert not synced
