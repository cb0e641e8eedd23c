"""The parsing worker (actors/visit/parsing_worker.py): an agent's parser, store writer and summary
writer in one Ray actor. What it parses is the parser's answer; what it writes is in the WARC and
the link records; the summaries it spills are those of the pages' visible texts, whether it
parsed them itself or was restarted since (then from the bodies the write carries)."""

from __future__ import annotations

from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from raycrawl.actors.cluster.crew_worker import actor_class
from raycrawl.actors.visit.parser import Parser
from raycrawl.actors.visit.parsing_worker import ParsingWorker
from raycrawl.actors.visit.store_writer import StoreItem
from raycrawl.actors.visit.summary_writer import document_counts
from raycrawl.exchange import FetchResult
from raycrawl.settings import Settings
from raycrawl.storage.link_records import LinkRecord, iter_link_records
from raycrawl.storage.summary_spill import iter_spill, spill_paths
from raycrawl.text import page_text


def pages(n: int, tag: str) -> list[FetchResult]:
    out = []
    for i in range(n):
        body = f"<title>{tag} {i}</title><p>words about {tag} number {i} <a href='/p{i + 1}'>next</a>".encode()
        out.append(FetchResult(url=f"http://{tag}.test/p{i}", ip="127.0.0.1", status=200, ctype="text/html",
                               headers={"content-type": "text/html"}, raw_headers=[(b"content-type", b"text/html")],
                               body=body))
    return out


def items(frs: list[FetchResult]) -> list:
    return [StoreItem(fr, None, LinkRecord(url=fr.url, status=fr.status, ctype=fr.ctype, size=len(fr.body))) for fr in frs]


def spilled(out: Path) -> dict[str, dict]:
    return {r["url"]: r for r in iter_spill(spill_paths(out))}


def test_parse_write_and_summaries_in_one_actor(ray_local, redis_url, tmp_path) -> None:
    import ray

    out = tmp_path / "crawl"
    actor = actor_class().remote(str(out), redis_url, "agent0", Settings(out=str(out)))
    try:
        batch = pages(5, "a")
        parsed, _ = ray.get(actor.parse.remote(batch), timeout=60)
        assert [r.links for r in parsed] == [Parser().parse(fr).links for fr in batch]
        # all five stored; the summaries of the three named, from the parser's texts
        ray.get(actor.write_batch.remote(items(batch), [fr.url for fr in batch[:3]]), timeout=60)
        # a worker killed after a parse (Ray restarts it) spills the next write's summaries from its bodies
        later = pages(4, "b")
        ray.get(actor.parse.remote(later), timeout=60)
        ray.kill(actor, no_restart=False)
        ray.get(actor.write_batch.remote(items(later), [fr.url for fr in later]), timeout=120)
        ray.get(actor.close.remote(), timeout=60)
    finally:
        ray.kill(actor)
    want = {fr.url: fr for fr in batch[:3] + later}
    got = spilled(out)
    assert set(got) == set(want)
    for url, fr in want.items():
        length, counts = document_counts(page_text(fr.body, fr.charset))
        assert (got[url]["length"], got[url]["terms"]) == (length, counts) and length > 0
    # every page in the WARC, byte for byte, and in the link records
    bodies = {}
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    bodies[rec.rec_headers.get_header("WARC-Target-URI")] = rec.content_stream().read()
    assert bodies == {fr.url: fr.body for fr in batch + later}
    assert {r.url for r in iter_link_records(out)} == set(bodies)


def test_a_write_without_its_parse_spills_the_same_summaries(tmp_path) -> None:
    """The texts the parser kept and the texts made again from the bodies are the same."""
    batch = pages(6, "c")
    urls = [fr.url for fr in batch]
    parsed = ParsingWorker(str(tmp_path / "one"), "agent0", Settings(out=str(tmp_path / "one")))
    parsed.parse(batch)
    parsed.write_batch(items(batch), urls)
    parsed.close()
    fresh = ParsingWorker(str(tmp_path / "two"), "agent0", Settings(out=str(tmp_path / "two")))
    fresh.write_batch(items(batch), urls)
    fresh.close()
    assert spilled(tmp_path / "one") == spilled(tmp_path / "two") and len(spilled(tmp_path / "one")) == 6


def test_without_a_shared_out_a_piece_carries_its_summaries(monkeypatch, tmp_path) -> None:
    """With --agent-dir the spill files travel in the store writer's pieces: once a piece is in
    the object store (what the agent waits for before it commits), so are its pages' summaries."""
    from s3_server import BUCKET, MotoS3, set_env

    with MotoS3() as s3:
        set_env(monkeypatch, s3)
        out = tmp_path / "agent"
        settings = Settings(out=str(out), agent_dir=str(tmp_path), out_store=f"s3://{BUCKET}/crawl", ship_seconds=60)
        worker = ParsingWorker(str(out), "agent0", settings)
        shipped = []
        for piece, tag in enumerate(("d", "e"), 1):
            batch = pages(3, tag)
            worker.parse(batch)
            assert worker.write_batch(items(batch), [fr.url for fr in batch]).piece == piece
            stored = worker.ship(timeout=30)
            assert stored.in_store
            shipped += batch
            objects = s3.objects("crawl")
            spills = {k: v for k, v in objects.items() if k.startswith("summaries/spill/")}
            work = tmp_path / f"read-{tag}"
            for k, v in spills.items():
                (work / k).parent.mkdir(parents=True, exist_ok=True)
                (work / k).write_bytes(v)
            assert set(spilled(work)) == {fr.url for fr in shipped}
        worker.close()
        # an agent of the same name on another machine (a resume) never takes a stored file's name
        again = ParsingWorker(str(tmp_path / "elsewhere"), "agent0",
                              Settings(out=str(tmp_path / "elsewhere"), agent_dir=str(tmp_path),
                                       out_store=f"s3://{BUCKET}/crawl", ship_seconds=60))
        assert again.summaries.spill.path.name not in {k.rsplit("/", 1)[-1] for k in s3.objects("crawl")}
        again.close()
