"""The columnar URL index in Common Crawl's schema (storage/cc_index.py, issue 54, part): its columns
and types are those of their cc-index-schema-flat.json (vendored, tests/data/cc-index-table); their
published example queries run unchanged in DuckDB and count what the WARC file holds; every row's
WARC, WET and WAT (file, offset, length) is that capture's record."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

from test_warc import exchange
from test_wet import ENGLISH, GERMAN, page
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from raycrawl.storage.warc import WarcStore

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "cc-index-table"
CRAWL = "CC-MAIN-2018-05"  # the crawl the published queries name: they run as written
SPARK_TO_ARROW = {"string": "string", "integer": "int32", "short": "int16", "timestamp": "timestamp[us, tz=UTC]",
                  "binary": "binary"}


def _typed(fr, content_type: str, status_line: str | None = None, **headers: str):  # noqa: ANN001, ANN202
    fr.headers = {"content-type": content_type, **{k.lower(): v for k, v in headers.items()}}
    fr.ctype = content_type
    fr.raw_headers = [(b"Content-Type", content_type.encode()), *((k.encode(), v.encode()) for k, v in headers.items())]
    if status_line:
        fr.status_line = status_line
    return fr


def ccindex(crawl_dir: Path):  # noqa: ANN201 - a duckdb connection
    """DuckDB with the view their queries read (``ccindex.ccindex``) over ``crawl_dir``'s table, as
    docs/archiving.md sets it up."""
    import duckdb

    db = duckdb.connect()
    db.execute("CREATE SCHEMA ccindex")
    db.execute("CREATE VIEW ccindex.ccindex AS SELECT * FROM read_parquet("
               f"'{crawl_dir}/cc-index/table/cc-main/warc/*/*/*.parquet', hive_partitioning=true)")
    return db


def published(db, name: str) -> list[tuple]:  # noqa: ANN001 - a duckdb connection
    """The rows of their published query ``name`` (vendored in DATA), run as written."""
    return db.execute((DATA / f"{name}.sql").read_text()).fetchall()


def _member(path: Path, offset: int, length: int):  # noqa: ANN202 - the one record there, read by warcio
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    assert len(gzip.decompress(data)) > 0  # (exactly one whole gzip member)
    return next(iter(WarcioIterator(io.BytesIO(data))))


def test_cc_index_has_their_schema_runs_their_queries_and_points_at_every_record(tmp_path) -> None:
    import pyarrow.parquet as pq

    crawl = tmp_path / "crawl"
    store = WarcStore(crawl / "warc", "agent0")
    store.write(_typed(exchange("http://www.example.co.uk/robots.txt", b"User-agent: *\nAllow: /\n"), "text/plain"))
    store.write(exchange("http://www.example.co.uk/de/news", page("Energie", GERMAN)))
    store.write(exchange("http://blog.example.org/en?id=7", page("Energy", ENGLISH)))
    store.write(_typed(exchange("http://blog.example.org/paper.pdf", b"%PDF-1.4\n" + bytes(200)), "application/pdf"))
    store.write(exchange("http://blog.example.org/gone", b"<p>no", status=404))
    store.write(_typed(exchange("http://a.test:8080/old", b"", status=301), "text/html",
                       "HTTP/1.1 301 Moved Permanently", Location="http://a.test:8080/new"))
    store.close()
    (warc,) = (crawl / "warc").glob("*.warc.gz")
    truth = {}  # what warcio reads in the WARC file: url -> (status, record id)
    with open(warc, "rb") as fh:
        for rec in WarcioIterator(fh):
            if rec.rec_type == "response":
                truth[rec.rec_headers.get_header("WARC-Target-URI")] = (
                    int(rec.http_headers.get_statuscode()), rec.rec_headers.get_header("WARC-Record-ID"))

    run = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "cc-index", str(crawl), "--crawl", CRAWL],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    table = crawl / "cc-index" / "table" / "cc-main" / "warc"
    assert sorted(p.relative_to(table).as_posix() for p in table.rglob("*.parquet")) == [
        f"crawl={CRAWL}/subset={s}/part-00000.parquet" for s in ("crawldiagnostics", "robotstxt", "warc")]

    # Their schema, column by column (crawl and subset are the partitions), then ours.
    theirs = json.loads((DATA / "cc-index-schema-flat.json").read_text())["fields"]
    schema = pq.read_schema(table / f"crawl={CRAWL}" / "subset=warc" / "part-00000.parquet")
    expected = [(f["name"], SPARK_TO_ARROW[f["type"]], f["nullable"]) for f in theirs if f["name"] not in ("crawl", "subset")]
    assert [(f.name, str(f.type), f.nullable) for f in schema][: len(expected)] == expected
    assert [f.name for f in schema][len(expected):] == [
        "wet_filename", "wet_record_offset", "wet_record_length", "wat_filename", "wat_record_offset", "wat_record_length"]

    db = ccindex(crawl)

    subsets = {"warc": sum(s == 200 and not u.endswith("/robots.txt") for u, (s, _) in truth.items()),
               "robotstxt": sum(u.endswith("/robots.txt") for u in truth),
               "crawldiagnostics": sum(s != 200 for s, _ in truth.values())}
    assert sorted(published(db, "count-by-partition")) == sorted((n, CRAWL, s) for s, n in subsets.items())
    assert sorted(published(db, "count-fetch-status")) == [(1, 301), (1, 404)]
    assert published(db, "count-language-tld") == []  # (it keeps combinations of 1,000 pages or more)
    (pdf,) = published(db, "get-records-of-mime-type")
    assert pdf[:3] == ("http://blog.example.org/paper.pdf", "application/pdf", "application/pdf")
    rec = _member(crawl / "warc" / pdf[3], pdf[4], pdf[5])
    assert rec.rec_headers.get_header("WARC-Target-URI") == pdf[0] and rec.content_stream().read().startswith(b"%PDF")

    rows = {r["url"]: r for r in pq.read_table(table).to_pylist()}
    assert set(rows) == set(truth)
    for url, row in rows.items():
        status, record_id = truth[url]
        rec = _member(crawl / "warc" / row["warc_filename"], row["warc_record_offset"], row["warc_record_length"])
        assert rec.rec_headers.get_header("WARC-Record-ID") == record_id and row["fetch_status"] == status
        meta = _member(crawl / "wat" / row["wat_filename"], row["wat_record_offset"], row["wat_record_length"])
        assert meta.rec_type == "metadata" and meta.rec_headers.get_header("WARC-Refers-To") == record_id
        if row["wet_filename"] is not None:
            text = _member(crawl / "wet" / row["wet_filename"], row["wet_record_offset"], row["wet_record_length"])
            assert text.rec_type == "conversion" and text.rec_headers.get_header("WARC-Refers-To") == record_id
    assert {u for u, r in rows.items() if r["wet_filename"]} == {"http://www.example.co.uk/de/news",
                                                                  "http://blog.example.org/en?id=7"}
    de, en = rows["http://www.example.co.uk/de/news"], rows["http://blog.example.org/en?id=7"]
    assert (de["content_languages"], en["content_languages"]) == ("deu", "eng")
    assert (de["url_host_registry_suffix"], de["url_host_registered_domain"], de["url_host_tld"],
            de["url_host_2nd_last_part"], de["url_host_name_reversed"]) == ("co.uk", "example.co.uk", "uk", "co",
                                                                             "uk.co.example.www")
    assert (en["url_surtkey"], en["url_path"], en["url_query"], en["url_port"]) == ("org,example,blog)/en?id=7", "/en",
                                                                                     "id=7", None)
    cdxj = {json.loads(line.split(" ", 2)[2])["url"]: json.loads(line.split(" ", 2)[2])
            for line in (crawl / "indexes" / "index.cdxj").read_text().splitlines()}
    assert set(cdxj) == set(truth)
    line = cdxj["http://www.example.co.uk/de/news"]
    assert (line["languages"], line["charset"], line["wet_filename"], int(line["wet_offset"]), int(line["wat_length"])) == (
        "deu", de["content_charset"], de["wet_filename"], de["wet_record_offset"], de["wat_record_length"])
    moved = rows["http://a.test:8080/old"]
    assert (moved["fetch_redirect"], moved["url_port"], moved["url_host_registered_domain"]) == (
        "http://a.test:8080/new", 8080, None)  # (.test is no public suffix)
