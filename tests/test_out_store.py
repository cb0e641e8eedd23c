"""Outputs in object storage (storage/out_store.py), against a real S3 API server on loopback
(moto's server mode, tests/s3_server.py): what the store holds is read back with boto3, not with
the client under test."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from archive_check import served_pages, stored_pages
from s3_server import BUCKET, MotoS3, environ, set_env

from raycrawl.errors import UserError
from raycrawl.storage.out_store import OutStore, StoreError, shipped_files

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store_ray():
    """(port, address): a Ray cluster whose nodes hold the store's credentials, as a cloud
    cluster's nodes do (docs/crawling.md), for crawls whose store is served on that port. A crawl's
    store actors take the credentials from their node (a joined cluster's workers do not inherit
    the driver's environment, and secrets are not forwarded through runtime_env); one cluster for
    the module, where each crawl once started a Ray of its own (~5 CPU-s and ~5 s a start)."""
    from local_cluster import local_cluster

    from raycrawl.redis_server import free_port

    port = free_port()
    cluster = local_cluster(2, env=MotoS3(port).env(), ports=1)
    yield port, cluster.address
    cluster.shutdown()


def _on(store_ray, s3: MotoS3, **extra: str) -> dict[str, str]:
    """A crawl's environment: the store's credentials, and the cluster whose nodes hold them."""
    return {**environ(s3), "RAY_ADDRESS": store_ray[1], **extra}


@pytest.fixture
def s3(monkeypatch):
    with MotoS3() as server:
        set_env(monkeypatch, server)
        yield server


def _local(out: Path) -> dict[str, bytes]:
    return {k: p.read_bytes() for k, p in shipped_files(out).items()}


def test_sync_up_pending_and_down(s3, tmp_path) -> None:
    out = tmp_path / "out"
    for rel, data in {"warc/a.warc.gz": b"x" * 10, "links/agent0-00000.rec.gz": b"y", "report.json": b"{}",
                      "redis/appendonly.aof": b"z", "sieve/s0": b"q", "warc/b.warc.gz.tmp": b"t"}.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    store = OutStore(f"s3://{BUCKET}/run/")
    assert set(store.pending(out)) == {"warc/a.warc.gz", "links/agent0-00000.rec.gz", "report.json"}
    assert store.sync_up(out) == (3, 13)
    assert s3.objects("run") == _local(out)  # only what a reader needs: no redis/, sieve/, .tmp
    assert store.pending(out) == {}
    (out / "report.json").write_bytes(b'{"pages": 1}')  # rewritten by a later run: sent again
    assert list(store.pending(out)) == ["report.json"] and store.sync_up(out) == (1, 12)
    copy = tmp_path / "copy"
    assert store.sync_down(copy) == 3 and _local(copy) == _local(out)
    assert store.sync_down(copy) == 0  # nothing it already holds at its size


def test_an_http_endpoint_needs_no_allow_http(s3, tmp_path, monkeypatch) -> None:
    """``AWS_ENDPOINT_URL=http://…`` alone works, as with AWS's own tools (obstore by itself answers
    "builder error"); ``AWS_ALLOW_HTTP=false`` still refuses plain HTTP, with one line."""
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    (tmp_path / "report.json").write_bytes(b"{}")
    assert OutStore(f"s3://{BUCKET}/plain/").sync_up(tmp_path) == (1, 2)
    assert s3.objects("plain") == {"report.json": b"{}"}
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    with pytest.raises(StoreError) as e:
        OutStore(f"s3://{BUCKET}/plain/").listing()
    assert "\n" not in str(e.value)


def test_store_writer_pieces_reach_the_store_before_they_count(s3, tmp_path) -> None:
    """Without a shared OUT the store writer works in pieces of ``ship_seconds``: a batch's answer
    names its piece and the last piece in the store; a piece is in the store (read back with boto3)
    by the time it is counted shipped; ``ship`` closes the piece in progress and waits for it."""
    from raycrawl.actors.visit.store_writer import StoreItem, StoreWriter
    from raycrawl.exchange import FetchResult
    from raycrawl.storage.link_records import LinkRecord

    def batch(i: int):
        fr = FetchResult(url=f"http://a.test/{i}", ip="127.0.0.1", status=200, body=b"page %d" % i,
                         ctype="text/html", started=1.7e9, ended=1.7e9, status_line="HTTP/1.1 200 OK",
                         raw_headers=[(b"Content-Type", b"text/html")], http_version="1.1")
        return [StoreItem(fr, None, LinkRecord(url=fr.url, status=200, ctype="text/html"))]

    w = StoreWriter(tmp_path, "agent3", out_store=f"s3://{BUCKET}/pieces/", ship_seconds=0.3)
    first = w.write_batch(batch(0))
    assert (first.piece, first.in_store) == (1, False)
    assert w.write_batch(batch(1)).piece == 1  # within the piece's time: the same piece
    time.sleep(0.35)
    assert w.write_batch(batch(2)).piece == 2  # its time is up: piece 1 closed and on its way
    assert w.shipper.wait_shipped(1, timeout=30) >= 1
    stored = s3.objects("pieces")
    warcs = [k for k in stored if k.startswith("warc/")]
    assert len(warcs) == 1 and [k for k in stored if k.startswith("links/")]
    import io

    from warcio.archiveiterator import ArchiveIterator

    uris = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(io.BytesIO(stored[warcs[0]]))
            if r.rec_type == "response"]
    assert uris == ["http://a.test/0", "http://a.test/1"]
    done = w.ship(timeout=30)
    assert (done.piece, done.shipped) == (2, 2) and done.in_store
    assert len([k for k in s3.objects("pieces") if k.startswith("warc/")]) == 2
    assert w.ship(timeout=30).shipped == 2  # nothing new: nothing to close
    w.close()


def test_refusals_are_one_line(s3, tmp_path, capsys) -> None:
    with pytest.raises(StoreError, match="refused to list") as e:
        OutStore("s3://no-such-bucket/x").listing()
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="not an object-store URL"):
        OutStore("/tmp/x")
    # a crawl whose store refuses stops before anything starts, with one line, and writes nothing
    from raycrawl.cli import main

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n")
    for store, why in (("s3://no-such-bucket/x", "refused to list"), ("/data/x", "object-store URL")):
        assert main(["crawl", "--seeds", str(seeds), "--out", str(tmp_path / "c"), "--out-store", store]) == 2
        assert why in capsys.readouterr().err
        assert not (tmp_path / "c").exists()
    (tmp_path / "report.json").write_text("{}")
    s3.stop()
    with pytest.raises(StoreError, match="once the store answers, --resume") as e:
        OutStore(f"s3://{BUCKET}/run").sync_up(tmp_path, attempts=2, pause=0.1)
    assert "\n" not in str(e.value)


def _cli(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raycrawl", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**env, "RAY_AUTH_MODE": "disabled"}, timeout=timeout)


def _crawl_args(web, out: Path, *extra: str) -> list[str]:
    return ["crawl", "--seeds", str(web.seeds_file), "--out", str(out), "--dns-server",
            "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8", "--host-delay", "0.05",
            "--ip-delay", "0.0", "-s", "warc_max_bytes=20000", *extra]


def _crawl_while_the_store_goes_away(web, s3: MotoS3, args: list[str], env: dict) -> None:
    """``raycrawl crawl ARGS``, the S3 server killed once websim has answered 10 requests: the crawl
    must stop with one line (exit 2, no traceback) naming the store and --resume. The server is then
    started again, empty (moto keeps objects in memory)."""
    # (the agents wait 10 s for the store at the end, not the default minute: RAYCRAWL_STORE_WAIT)
    proc = subprocess.Popen([sys.executable, "-m", "raycrawl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**env, "RAY_AUTH_MODE": "disabled", "RAYCRAWL_STORE_WAIT": "10"})
    deadline = time.time() + 120
    while len(web.requests()) < 10 and time.time() < deadline:
        time.sleep(0.1)
    s3.stop()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-3000:]
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("raycrawl crawl: error:")]
    assert "object store" in line and "--resume" in line, line
    s3.start()


def _graph(files: dict[str, bytes]) -> dict[str, object]:
    """A graph directory's files (name -> bytes), but graph.json without its build time."""
    out: dict[str, object] = {k: v for k, v in files.items() if not k.endswith((".png", "graph.json"))}
    out["graph.json"] = {k: v for k, v in json.loads(files["graph.json"]).items() if k != "seconds"}
    return out


@pytest.mark.slow
def test_crawl_ships_its_outputs_and_readers_use_the_store(store_ray, tmp_path) -> None:
    """A crawl with --out-store: every file a reader needs is in the store byte for byte (the WARC
    files rotated at 20 kB: several, each shipped once closed); `graph build s3://…` builds from the
    store alone the graph a local build makes, and puts it in the store."""
    from raycrawl.websim import Websim

    out = tmp_path / "crawl"
    with MotoS3(store_ray[0]) as s3:
        env = _on(store_ray, s3, RAYCRAWL_STORE_CACHE=str(tmp_path / "cache"))
        with Websim(hosts=6, ips=2, seed=3, clean=True, pages_per_host_mean=6, out_dir=tmp_path / "web") as web:
            r = _cli(*_crawl_args(web, out, "--out-store", f"s3://{BUCKET}/c1"), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        stored = s3.objects("c1")
        assert stored == _local(out)
        assert len([k for k in stored if k.startswith("warc/")]) >= 3
        assert {"crawl.log", "report.json", "crawl-id"} <= set(stored)
        r = _cli("graph", "build", f"s3://{BUCKET}/c1", env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        assert _cli("graph", "build", str(out), env=env).returncode == 0
        local = _graph({p.name: p.read_bytes() for p in (out / "graph").iterdir() if p.is_file()})
        stored = _graph({k[len("graph/"):]: v for k, v in s3.objects("c1").items() if k.startswith("graph/")})
    assert len(local) > 5 and stored == local


@pytest.mark.slow
def test_store_gone_mid_crawl_stops_with_one_line_then_resume_uploads(store_ray, tmp_path) -> None:
    """The S3 server is killed mid-crawl: the crawl goes on to the end on local disk, then stops
    with one line; with the server back (moto's memory is gone: an empty bucket), --resume uploads
    everything, and the WARC files hold a response for every page websim served."""
    from raycrawl.storage.warc import iter_records
    from raycrawl.websim import Websim

    out = tmp_path / "crawl"
    with MotoS3(store_ray[0]) as s3, Websim(hosts=6, ips=2, seed=3, clean=True, pages_per_host_mean=6,
                                            out_dir=tmp_path / "web") as web:
        env = _on(store_ray, s3)
        _crawl_while_the_store_goes_away(web, s3, _crawl_args(web, out, "--out-store", f"s3://{BUCKET}/c2"), env)
        r = _cli(*_crawl_args(web, out, "--resume", "--out-store", f"s3://{BUCKET}/c2"), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        assert s3.objects("c2") == _local(out)
        served = served_pages(web, web.requests())
    stored = {rec.headers["WARC-Target-URI"] for _, _, rec in iter_records(out / "warc")}
    assert served and served <= stored, sorted(served - stored)[:5]


@pytest.mark.slow
def test_agents_without_a_shared_out_outlast_the_store_going_away(store_ray, tmp_path) -> None:
    """Two agents, each in a directory of its own (--agent-dir): the S3 server is killed mid-crawl;
    the agents crawl to the end on their disks, then the crawl stops with one line (their shards
    and files could not be put away). With the server back (empty), --resume puts everything in
    the store: every page websim served is in the stored WARC files, and the shards' state."""
    from raycrawl.websim import Websim

    out, agents = tmp_path / "crawl", tmp_path / "agents"
    store = f"s3://{BUCKET}/c3"
    with MotoS3(store_ray[0]) as s3, Websim(hosts=8, ips=2, seed=5, clean=True, pages_per_host_mean=6,
                                            out_dir=tmp_path / "web") as web:
        env = _on(store_ray, s3, RAYCRAWL_STORE_CACHE=str(tmp_path / "cache"))
        _crawl_while_the_store_goes_away(
            web, s3, _crawl_args(web, out, "--agents", "2", "--out-store", store, "--agent-dir", str(agents)), env)
        r = _cli(*_crawl_args(web, out, "--resume", "--agents", "2", "--out-store", store, "--agent-dir", str(agents)),
                 env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        served = served_pages(web, web.requests())
        stored = s3.objects("c3")
    in_store = stored_pages(stored, tmp_path / "stored-warc")
    assert served and served <= in_store, sorted(served - in_store)[:5]
    assert {k.split("/")[1] for k in stored if k.startswith("sieve/")} == {f"{i:02d}" for i in range(64)}
    assert {"crawl.log", "report.json"} <= set(stored)
    assert json.loads(stored["report.json"])["stopped"] == "frontier empty"


@pytest.mark.slow
def test_agents_without_a_shared_out_use_a_dedup_index(store_ray, tmp_path) -> None:
    """--dedup-index with --agent-dir: the driver builds the table of the earlier collection once and
    puts it in the store, and each agent takes it from there into its own directory; the second
    crawl's stored WARC files hold revisits of the first crawl's captures, each of a byte-identical
    payload (read back with warcio)."""
    import io

    from warcio.archiveiterator import ArchiveIterator

    from raycrawl.websim import Websim

    first, second, agents = tmp_path / "first", tmp_path / "second", tmp_path / "agents"
    with MotoS3(store_ray[0]) as s3, Websim(hosts=8, ips=2, seed=5, clean=True, pages_per_host_mean=6,
                                            out_dir=tmp_path / "web") as web:
        env = _on(store_ray, s3, RAYCRAWL_STORE_CACHE=str(tmp_path / "cache"))
        r = _cli(*_crawl_args(web, first), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        r = _cli("warc", "index", str(first), "-o", str(tmp_path / "first.cdxj"), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        r = _cli(*_crawl_args(web, second, "--agents", "2", "--out-store", f"s3://{BUCKET}/dd", "--agent-dir",
                              str(agents), "--dedup-index", str(tmp_path / "first.cdxj")), env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        stored = s3.objects("dd")
    payloads = {}  # (URL, WARC-Date) → payload digest of the first crawl's responses
    for path in (first / "warc").glob("*.warc.gz"):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    h = rec.rec_headers
                    payloads[h.get_header("WARC-Target-URI"), h.get_header("WARC-Date")[:19]] = \
                        h.get_header("WARC-Payload-Digest")
    revisits = []
    for key, data in stored.items():
        if key.startswith("warc/"):
            for rec in ArchiveIterator(io.BytesIO(data)):
                h = rec.rec_headers
                if rec.rec_type == "revisit" and (h.get_header("WARC-Refers-To-Target-URI"),
                                                  (h.get_header("WARC-Refers-To-Date") or "")[:19]) in payloads:
                    revisits.append(h)  # (to the second: the index's timestamps have no fraction)
    assert len(revisits) > 10, len(revisits)
    assert {a.name for a in (agents / next(agents.iterdir()).name).iterdir()} == {"agent0", "agent1"}
    for h in revisits:
        assert h.get_header("WARC-Payload-Digest") == payloads[h.get_header("WARC-Refers-To-Target-URI"),
                                                               h.get_header("WARC-Refers-To-Date")[:19]]


@pytest.mark.slow
def test_agents_without_a_shared_out_revisit(store_ray, tmp_path) -> None:
    """--revisit with --agent-dir: the driver plans the pass from the link records in the store (no
    agent's file is on its disk) and puts the due file there; each agent takes it into its own
    directory. Against websim moved to its next epoch (same port, same URLs): every page of pass 0
    asked again, a 304 exactly for the HTML pages the manifest says did not change, a full response
    for those that changed, a 404 for those removed — as the link records in the store say."""
    from raycrawl.redis_server import free_port
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.urls import canonicalize
    from raycrawl.websim import Websim

    out, agents, port = tmp_path / "crawl", tmp_path / "agents", free_port()
    store = f"s3://{BUCKET}/rv"
    params = {"hosts": 8, "ips": 2, "seed": 3, "pages_per_host_mean": 6, "change_rates": True, "clean": True}
    with MotoS3(store_ray[0]) as s3:
        env = _on(store_ray, s3, RAYCRAWL_STORE_CACHE=str(tmp_path / "cache"))
        for epoch in (0, 1):
            with Websim(**params, epoch=epoch, port=port, out_dir=tmp_path / f"web{epoch}") as web:
                extra = ["--revisit"] if epoch else []
                r = _cli(*_crawl_args(web, out, "--agents", "2", "--out-store", store, "--agent-dir", str(agents),
                                      *extra), env=env)
                assert r.returncode == 0, r.stderr[-3000:]
                assert web.audit(0.05, 0.0).ok, web.audit(0.05, 0.0).summary()
                asked = {canonicalize(f"http://{q.host}{q.target}") for q in web.requests()}
                manifest = web.manifest
        stored = s3.objects("rv")
    links = tmp_path / "stored"
    for key, data in stored.items():
        if key.startswith("links/"):
            (links / key).parent.mkdir(parents=True, exist_ok=True)
            (links / key).write_bytes(data)
    records = list(iter_link_records(links))
    pass0 = {r.url for r in records if r.epoch == 0 and r.status == 200}
    by_url = {r.url: r for r in records if r.epoch == 1}
    assert pass0 and pass0 <= asked, sorted(pass0 - asked)[:5]
    html = {u for u in pass0 if manifest.pages[u]["kind"] == "html"}
    changed = {u for u in html if 1 in manifest.pages[u]["changed"]}
    gone = {u for u in html if manifest.pages[u]["removed_in"] == 1}
    assert changed and html - changed - gone
    for url in html:
        expect = 404 if url in gone else 200 if url in changed else 304
        assert by_url[url].status == expect, (url, by_url[url].status, manifest.pages[url]["changed"])
        assert (by_url[url].revisit_of is not None) == (expect == 304)
    assert json.loads(stored["report.json"])["pass"] == 1
