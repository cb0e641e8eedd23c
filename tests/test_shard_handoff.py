"""Host shards moving between agents' own directories through the object store
(storage/shard_handoff.py), against moto's S3 server on loopback and the session's real Redis;
what the store holds is read back with boto3."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from s3_server import BUCKET, MotoS3, set_env

from raycrawl.errors import UserError
from raycrawl.policies.assignment import shard_of
from raycrawl.redis_server import connect
from raycrawl.storage import shard_log
from raycrawl.storage.crawl_dir import virtual_queue
from raycrawl.storage.out_store import OutStore
from raycrawl.storage.redis_frontier import RedisFrontier
from raycrawl.storage.shard_handoff import ShardCheckpoints, ShardHandoff, missing_from_store, orphan_holders


@pytest.fixture
def s3(monkeypatch):
    with MotoS3() as server:
        set_env(monkeypatch, server)
        yield server


def _host_of_shard(shard: int) -> str:
    return next(h for i in range(10_000) if shard_of(h := f"h{i}.test") == shard)


def _agent(store: OutStore, client, root: Path, name: str) -> ShardHandoff:
    return ShardHandoff(store, RedisFrontier(client, "rc:", register=False), root / name, f"{name}@here:{root / name}")


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _named(objects: dict[str, bytes]) -> dict[str, bytes]:
    """The store's objects by the file each holds (a put-away's and a checkpoint's keys end in ``~ck…``)."""
    named = {k.split("~ck")[0]: v for k, v in objects.items()}
    assert len(named) == len(objects), sorted(objects)  # (one copy of each file)
    return named


def test_a_shard_moves_whole_and_stale_copies_never_win(s3, redis_url, tmp_path) -> None:
    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    a, b = (_agent(store, client, tmp_path, n) for n in ("agent0", "agent1"))
    host = _host_of_shard(5)
    # agent0 starts shard 5 (no state yet anywhere) and 6, and writes to them
    assert a.bring([5, 6]).files == 0
    sieve5 = a.out / "sieve" / "05"
    (sieve5 / "queue-0").write_bytes(b"http://x/1\n" * 100)
    (sieve5 / "fps").mkdir()
    (sieve5 / "fps" / "run-1").write_bytes(bytes(range(256)))
    vq = virtual_queue(a.out / "virtualizer", host)
    vq.parent.mkdir(parents=True)
    vq.write_bytes(b"/a\n/b\n")
    client.hset("rc:vend", host, 6)
    before = _files(sieve5)
    # a leftover of an older state in the store is removed by the next put-away
    s3.client().put_object(Bucket=BUCKET, Key="crawl/sieve/05/old-file", Body=b"old")
    assert a.put_away([5]) == 3
    assert not sieve5.exists() and not vq.exists() and (a.out / "sieve" / "06").is_dir()
    stored = _named(s3.objects("crawl"))
    assert {k: v for k, v in stored.items() if k.startswith("sieve/05/")} == {
        f"sieve/05/{k}": v for k, v in before.items()}
    assert stored[f"virtualizer/05/{vq.name}"] == b"/a\n/b\n"
    # agent1 takes it: exactly what agent0 had, its own stale copy of the shard replaced
    (b.out / "sieve" / "05").mkdir(parents=True)
    (b.out / "sieve" / "05" / "queue-0").write_bytes(b"stale")
    assert b.bring([5]).files == 3
    assert _files(b.out / "sieve" / "05") == before
    assert virtual_queue(b.out / "virtualizer", host).read_bytes() == b"/a\n/b\n"
    # agent0 may not take back a shard agent1 holds (its state is on agent1's disk), nor may anyone
    # take shard 6 while agent0 holds it: one line, nothing touched
    with pytest.raises(UserError, match=r"shards \[5\].*agent1@here") as e:
        a.bring([5])
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"shards \[6\]"):
        b.bring([6])
    assert (a.out / "sieve" / "06").is_dir()
    # ... until agent1 is declared departed (fenced, actors/cluster/lease.py): then its shard is taken over
    # from the last checkpoint (here the put-away's files) and its log, whose spills are applied
    log = RedisFrontier(client, "rc:", register=False)
    log.log_shards({5: [shard_log.spilled(host, 6, ["/c"]), shard_log.enqueued(["http://x/2"], [0])]})
    client.set("rc:v:agent1:fenced", "1")
    c = _agent(store, client, tmp_path, "agent2")
    got = c.bring([5])
    assert got.taken_over == [5] and got.files == 3
    assert _files(c.out / "sieve" / "05") == before
    assert virtual_queue(c.out / "virtualizer", host).read_bytes() == b"/a\n/b\n/c\n"
    # the departed holder, closing late, puts nothing away over its successor's state, and says so
    stored = s3.objects("crawl")
    assert b.put_away([5]) == 0
    assert s3.objects("crawl") == stored and (b.out / "sieve" / "05").is_dir()
    client.delete("rc:v:agent1:fenced")
    client.hset("rc:shome", "5", b.holder)
    # the holder itself, restarted on the same directory (a --resume), keeps its newer local copy
    (b.out / "sieve" / "05" / "queue-0").write_bytes(b"newer")
    assert b.bring([5]).files == 0
    assert (b.out / "sieve" / "05" / "queue-0").read_bytes() == b"newer"
    # ... and refuses when that directory is gone
    import shutil

    shutil.rmtree(b.out / "sieve" / "05")
    with pytest.raises(UserError, match=r"shards \[5\]"):
        b.bring([5])
    client.close()


def test_a_store_that_refuses_keeps_the_shard(s3, redis_url, tmp_path) -> None:
    from raycrawl.storage.out_store import StoreError

    client = connect(redis_url)
    a = _agent(OutStore(f"s3://{BUCKET}/crawl"), client, tmp_path, "agent0")
    a.bring([1])
    (a.out / "sieve" / "01" / "queue-0").write_bytes(b"x")
    s3.stop()
    with pytest.raises(StoreError):
        a.put_away([1])
    assert (a.out / "sieve" / "01" / "queue-0").read_bytes() == b"x"
    assert client.hget("rc:shome", "1").decode() == a.holder  # still where it is
    # the store back, but empty (moto keeps objects in memory): the shard put away before is
    # missing from it, which taking it says instead of starting the shard over empty
    (a.out / "sieve" / "02").mkdir(parents=True)
    (a.out / "sieve" / "02" / "queue-0").write_bytes(b"y")
    client.hset("rc:shome", "2", a.holder)
    s3.start()
    assert a.put_away([2]) == 1
    s3.stop()
    s3.start()
    b = _agent(OutStore(f"s3://{BUCKET}/crawl"), client, tmp_path, "agent1")
    with pytest.raises(UserError, match=r"shard 2: the object store .* holds 0 of its 1 files"):
        b.bring([2])
    client.close()


def test_a_resumed_crawl_takes_the_last_runs_shards_over(s3, redis_url, tmp_path) -> None:
    """--resume names agents afresh: a shard the last run's agent still held (it died, or the run
    stopped short) is kept by that agent on that very directory, and taken over from its last
    checkpoint and log by anyone else. Before that, the store must hold every shard put away as
    its put-away left it."""
    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    f = RedisFrontier(client, "rc:", register=False)
    a, b = (_agent(store, client, tmp_path, n) for n in ("agent0", "agent1"))
    host = _host_of_shard(7)
    a.bring([7, 8])
    (a.out / "sieve" / "07" / "queue-0").write_bytes(b"http://x/1\n" * 10)
    (a.out / "sieve" / "08" / "queue-0").write_bytes(b"http://y/1\n")
    assert a.put_away([7, 8]) == 2
    assert missing_from_store(f, store) == []
    b.bring([7])  # the last run's agent1 holds 7, logs a spill, and dies with the run
    (b.out / "sieve" / "07" / "queue-0").write_bytes(b"newer")
    f.log_shards({7: [shard_log.spilled(host, 0, ["/z"])]})
    assert orphan_holders(f) == [7]
    assert orphan_holders(f) == []  # (once)
    # agent1 again, on the same directory: its own copy
    assert b.bring([7]).taken_over == []
    assert (b.out / "sieve" / "07" / "queue-0").read_bytes() == b"newer"
    # anyone else: the put-away state (its last checkpoint) and the log's spill
    assert orphan_holders(f) == [7]
    c = _agent(store, client, tmp_path, "agent2")
    got = c.bring([7])
    assert got.taken_over == [7]
    assert (c.out / "sieve" / "07" / "queue-0").read_bytes() == b"http://x/1\n" * 10
    assert virtual_queue(c.out / "virtualizer", host).read_bytes() == b"/z\n"
    # a shard put away whose files left the store: the resume is refused before anything starts
    [key] = [k for k in s3.objects("crawl") if k.startswith("sieve/08/queue-0")]
    s3.client().delete_object(Bucket=BUCKET, Key=f"crawl/{key}")
    (missing,) = missing_from_store(f, store)
    assert missing.startswith("shard 8: 0 of its 1 files"), missing
    # a checkpoint record of an older raycrawl ("FILES BYTES", no keys): refused in one line, not read
    client.hset("rc:sckpt", "9", "3 1024")
    with pytest.raises(UserError, match="shard 9's checkpoint record .* older raycrawl"):
        missing_from_store(f, store)
    client.close()


def test_a_checkpoint_cut_short_leaves_the_last_one_whole(s3, redis_url, tmp_path) -> None:
    """A holder's checkpoints go under new keys, which Redis names in one step: a holder that dies
    after its uploads but before Redis named them (here fenced meanwhile, so the naming is refused)
    leaves the checkpoint before it whole, not a mix of two, and deletes nothing."""
    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    f = RedisFrontier(client, "rc:", view="agent0", register=False)
    a = ShardHandoff(store, f, tmp_path / "agent0", f"agent0@here:{tmp_path / 'agent0'}")
    a.bring([3])
    sieve3 = a.out / "sieve" / "03"

    def state(queue: bytes, fps: bytes, url: str) -> None:
        (sieve3 / "queue-0").write_bytes(queue)
        if not (sieve3 / "fps").exists() or (sieve3 / "fps").read_bytes() != fps:  # (untouched otherwise)
            (sieve3 / "fps").write_bytes(fps)
        f.log_shards({3: [shard_log.enqueued([url], [0])]})

    def stored() -> dict[str, bytes]:
        return {k: v for k, v in s3.objects("crawl").items() if k.startswith("sieve/03/")}

    checkpoints = ShardCheckpoints(store, f, a.out, interval=0)
    state(b"http://x/1\n", b"A", "http://x/1")
    assert checkpoints.run([3]) == 1 and client.llen("rc:slog:3") == 0
    first = stored()
    assert sorted(k.split("~")[0] for k in first) == ["sieve/03/fps", "sieve/03/queue-0"]
    # the next one uploads what changed, under a key of its own; what it replaced goes after
    state(b"http://x/1\nhttp://x/2\n", b"A", "http://x/2")
    assert checkpoints.run([3]) == 1
    second = stored()
    assert len(second) == 2 and [k for k in second if k.startswith("sieve/03/fps")] == \
        [k for k in first if k.startswith("sieve/03/fps")]
    assert set(second.values()) == {b"A", b"http://x/1\nhttp://x/2\n"}
    # the third's uploads land, but its holder was declared departed before Redis named them
    state(b"http://x/1\nhttp://x/2\nhttp://x/3\n", b"AB", "http://x/3")
    client.set("rc:v:agent0:fenced", "1")
    checkpoints.run([3])
    assert len(stored()) == 4 and set(second.items()) <= set(stored().items())
    # the agent taking it over brings exactly the second checkpoint, and the log since
    c = _agent(store, client, tmp_path, "agent2")
    assert c.bring([3]).taken_over == [3]
    assert _files(c.out / "sieve" / "03") == {"fps": b"A", "queue-0": b"http://x/1\nhttp://x/2\n"}
    assert [e.urls for e in shard_log.parse(f.shard_logs([3])[3])] == [["http://x/3"]]
    client.close()


def test_a_round_of_many_shards_lists_the_store_twice_and_names_each_whole(s3, redis_url, tmp_path) -> None:
    """A checkpoint round over several changed shards confirms all their uploads with one listing
    (an S3 LIST is paid by the request: a listing a shard cost an agent of 32 shards 66 a round),
    and still names each shard's own files, and deletes only what each replaced."""
    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    f = RedisFrontier(client, "rc:", view="agent0", register=False)
    a = ShardHandoff(store, f, tmp_path / "agent0", f"agent0@here:{tmp_path / 'agent0'}")
    shards = [2, 3, 11, 40]
    a.bring(shards)
    listed = []
    listing = store.listing
    store.listing = lambda under=None: listed.append(under) or listing(under)
    checkpoints = ShardCheckpoints(store, f, a.out, interval=0)
    for rnd in (1, 2):
        for s in shards:
            (a.out / "sieve" / f"{s:02d}" / "queue-0").write_bytes(f"http://x/{s}\n".encode() * (s + rnd))
            (a.out / "sieve" / f"{s:02d}" / "fps").write_bytes(b"F%d" % s)  # (unchanged after the first round)
        f.log_shards({s: [shard_log.enqueued([f"http://x/{s}/{rnd}"], [0])] for s in shards})
        listed.clear()
        assert checkpoints.run(shards) == len(shards)
        assert sorted(listed) == ["sieve/", "sieve/", "virtualizer/", "virtualizer/"], listed
        assert all(client.llen(f"rc:slog:{s}") == 0 for s in shards)
        stored = s3.objects("crawl")
        assert _named(stored) == {
            **{f"sieve/{s:02d}/queue-0": f"http://x/{s}\n".encode() * (s + rnd) for s in shards},
            **{f"sieve/{s:02d}/fps": b"F%d" % s for s in shards}}
        named = f.checkpoints(shards)
        assert all(sorted(k.split("~")[0] for k in named[s]) == [f"sieve/{s:02d}/fps", f"sieve/{s:02d}/queue-0"]
                   and set(named[s]) <= set(stored) for s in shards), named
    client.close()


def test_a_virtual_queue_drained_while_its_shard_is_checkpointed_is_left_out(s3, redis_url, tmp_path) -> None:
    """The agent's virtualizer refills a host's URLs into Redis and deletes the drained queue's file
    while the sieve actor checkpoints the host's shard (a clean-clone run under load: the
    checkpoint's stat of the file it had listed raised inside a peer's ``enqueue``, which failed
    that peer's agent, and the URLs it had in flight were fetched twice). The queue, gone from
    Redis and disk, is left out of that checkpoint, which is taken; the next names no queue."""
    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    f = RedisFrontier(client, "rc:", view="agent0", register=False)
    a = ShardHandoff(store, f, tmp_path / "agent0", f"agent0@here:{tmp_path / 'agent0'}")
    a.bring([3])
    (a.out / "sieve" / "03" / "queue-0").write_bytes(b"http://x/1\n")
    host = _host_of_shard(3)
    vq = virtual_queue(a.out / "virtualizer", host)
    vq.parent.mkdir(parents=True)
    vq.write_bytes(b"/a\n/b\n")
    client.hset("rc:vend", host, 6)
    f.log_shards({3: [shard_log.enqueued(["http://x/1"], [0])]})
    put = store.put_bytes

    def drained_meanwhile(data: bytes, key: str) -> None:  # (the sieve's files go first)
        client.hdel("rc:vend", host)  # (the virtualizer's order: Redis forgets the queue, then its file goes)
        vq.unlink(missing_ok=True)
        put(data, key)

    store.put_bytes = drained_meanwhile
    assert ShardCheckpoints(store, f, a.out, interval=0).run([3]) == 1
    assert client.llen("rc:slog:3") == 0  # (taken: the log entries it holds dropped)
    assert sorted(k.split("~")[0] for k in s3.objects("crawl")) == ["sieve/03/queue-0"]
    client.close()


def test_a_holder_declared_departed_mid_put_away_overwrites_nothing_its_successor_reads(s3, redis_url, tmp_path) -> None:
    """A holder declared departed while its put-away uploads (it passed the fence check first)
    must not replace what its successor takes over with: the duplicate store of the shard's last
    put-away (claims of pages stored) with its own, which holds claims of pages it fetched but
    never had stored — a successor reading it would archive a revisit of a record that is nowhere.
    A put-away's uploads go under keys of their own, which Redis names only if the holder is not
    fenced; the next put-away deletes them."""
    from raycrawl.storage.dedup_store import FILE

    client = connect(redis_url)
    store = OutStore(f"s3://{BUCKET}/crawl")
    f1 = RedisFrontier(client, "rc:", view="agent1", register=False)
    a = _agent(store, client, tmp_path, "agent0")
    a.bring([4])
    (a.out / "sieve" / "04" / "queue-0").write_bytes(b"http://x/1\n")
    (a.out / "sieve" / "04" / FILE).write_bytes(b"claims of stored pages")
    assert a.put_away([4]) == 2
    b = ShardHandoff(store, f1, tmp_path / "agent1", f"agent1@here:{tmp_path / 'agent1'}")
    assert b.bring([4]).files == 2
    (b.out / "sieve" / "04" / "queue-0").write_bytes(b"http://x/1\nhttp://x/2\n")
    f1.log_shards({4: [shard_log.enqueued(["http://x/2"], [0])]})
    assert ShardCheckpoints(store, f1, b.out, interval=0).run([4]) == 1
    (b.out / "sieve" / "04" / FILE).write_bytes(b"claims of pages never stored")

    class FencedMidUpload(OutStore):  # (the real store; its first upload outlives the holder's lease)
        def put(self, path, key) -> None:
            client.set("rc:v:agent1:fenced", "1")
            super().put(path, key)

    late = ShardHandoff(FencedMidUpload(store.url), f1, b.out, b.holder)
    assert late.put_away([4]) == 0 and (b.out / "sieve" / "04").is_dir()
    c = _agent(store, client, tmp_path, "agent2")
    assert c.bring([4]).taken_over == [4]
    assert _files(c.out / "sieve" / "04") == {"queue-0": b"http://x/1\nhttp://x/2\n", FILE: b"claims of stored pages"}
    # the successor's own put-away leaves exactly its state in the store, the late uploads deleted
    assert c.put_away([4]) == 2
    assert _named(s3.objects("crawl")) == {"sieve/04/queue-0": b"http://x/1\nhttp://x/2\n",
                                             f"sieve/04/{FILE}": b"claims of stored pages"}
    assert missing_from_store(f1, store) == []
    client.close()


def test_a_restarted_sieve_actor_checkpoints_what_its_files_hold(s3, redis_url, ray_local, tmp_path) -> None:
    """A sieve actor that crashed may have been cut between its files and its log entry (an
    enqueue's, a flush's); restarted by Ray, it makes its files the shards' checkpoint at once, so
    that a successor never replays a log that disagrees with them."""
    import ray

    from raycrawl.actors.cluster import crew_worker
    from raycrawl.settings import Settings

    client = connect(redis_url)
    f = RedisFrontier(client, "rc:", register=False)
    f.set_shard_owners({s: "agent0" for s in range(64)})
    out = tmp_path / "agent0"
    settings = Settings(out=str(out), agent_dir=str(out), out_store=f"s3://{BUCKET}/crawl", checkpoint_seconds=3600.0,
                        url_cache=1000, near_dup=False)
    actor = crew_worker.actor_class().options(runtime_env={"env_vars": s3.env()}).remote(
        str(out), redis_url, "agent0", settings)
    try:
        host = _host_of_shard(9)
        assert ray.get(actor.enqueue.remote([f"http://{host}/a", f"http://{host}/b"]), timeout=60) == 2
        assert f.shard_log_lengths([9]) == {9: 1} and f.checkpoints([9]) == {9: None}  # (next one in an hour)
        ray.kill(actor, no_restart=False)
        deadline = time.monotonic() + 120  # (the kill is asynchronous: the old process may answer first)
        while not ray.get(actor.__ray_call__.remote(lambda _: ray.get_runtime_context().was_current_actor_reconstructed),
                          timeout=120):
            assert time.monotonic() < deadline, "the sieve actor was not restarted"
            time.sleep(0.2)
        assert f.shard_log_lengths([9]) == {9: 0}
        manifest = f.checkpoints([9])[9]
        stored = s3.objects("crawl")
        assert manifest and all(len(stored[k]) == size for k, size in manifest.items())
        ray.get(actor.close.remote(), timeout=60)
    finally:
        ray.kill(actor)
        client.close()
