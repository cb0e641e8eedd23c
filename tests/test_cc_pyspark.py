"""Common Crawl's own Spark jobs over a crawl's WET and WAT files (issue 54): cc-pyspark's
``word_count.py`` and ``wat_extract_links.py`` (vendored unchanged, tests/data/cc-pyspark) run with
``spark-submit`` in local mode, as cc-pyspark's README runs them, over what ``raycrawl warc wet``
and ``raycrawl warc wat`` wrote for an archive of real pages (Mozilla Readability's corpus, eight
languages) and a page of links. Their output is checked against raycrawl's own data: the words
with each page's extracted text, the linked hosts (``wat_extract_links.py`` as it ships runs its
host-level job) with the hosts of the parser's link records (every one found) and of the page's own
markup (none invented)."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from test_warc import exchange
from test_wat import PAGE

from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.warc import WarcStore

ROOT = Path(__file__).resolve().parents[1]
JOBS = Path(__file__).parent / "data" / "cc-pyspark"
PAGES = Path(__file__).parent / "data" / "readability-pages"
SPARK = ROOT / ".venv-spark"
WORD = re.compile(r"\w+", re.UNICODE)  # word_count.py's tokens (its own pattern, lower-cased)


def _archive(crawl: Path) -> dict[str, bytes]:
    """A WARC file of real pages, a page of links, a 404 and a redirect; url -> HTML of the 200s."""
    names = sorted(line.split("\t")[0] for line in (PAGES / "languages.tsv").read_text().splitlines()
                   if line and not line.startswith("#"))[::4]  # eight pages, eight languages
    html = {f"http://{name}.test/article": gzip.decompress((PAGES / f"{name}.html.gz").read_bytes()) for name in names}
    html["http://a.test/docs/page.html"] = PAGE
    store = WarcStore(crawl / "warc", "agent0")
    for url, body in html.items():
        store.write(exchange(url, body))
    store.write(exchange("http://a.test/gone", b"<p>no such page", status=404))
    store.close()
    return html


def _spark_submit(job: str, inputs: list[Path], table: str, work: Path) -> Path:
    """Run cc-pyspark's ``job`` over ``inputs`` (one ``file://`` URL a line, as its input lists are);
    the table's parquet directory."""
    listing = work / f"{table}.txt"
    listing.write_text("".join(f"file://{p}\n" for p in inputs))
    env = {**os.environ, "PYSPARK_PYTHON": str(SPARK / "bin" / "python"), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_HOSTNAME": "localhost", "PYTHONPATH": ""}
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run(
        [str(SPARK / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "512m",
         "--conf", "spark.ui.enabled=false", "--conf", f"spark.sql.warehouse.dir={work / 'warehouse'}",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         # a few kilobytes of input: two shuffle partitions, not 200, and a JVM that spends little on JIT
         "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.default.parallelism=2",
         "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
         "--py-files", f"{JOBS / 'sparkcc.py'},{JOBS / 'json_importer.py'}",
         str(JOBS / job), "--num_output_partitions", "1", "--log_level", "WARN", str(listing), table],
        capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return work / "warehouse" / table


def _rows(table: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [row for part in sorted(table.glob("*.parquet")) for row in pq.read_table(part).to_pylist()]


def _attribute_values(body: bytes) -> set[str]:
    """Every attribute value of every element of a page (selectolax): what a link can come from."""
    from selectolax.lexbor import LexborHTMLParser

    return {v for node in LexborHTMLParser(body).css("*") for v in node.attributes.values() if v}


@pytest.mark.slow
def test_cc_pyspark_word_count_and_link_extraction_run_unchanged_on_a_crawl(tmp_path) -> None:
    from raycrawl.actors.visit.parser import Parser
    from raycrawl.storage.wet import html_text

    assert (SPARK / "bin" / "spark-submit").exists(), f"{SPARK} is missing: `make spark` (make test does it)"
    assert shutil.which("java"), "Spark needs a JVM: `make system-packages` installs one"
    crawl = tmp_path / "crawl"
    html = _archive(crawl)
    for what in ("wet", "wat"):
        run = subprocess.run([sys.executable, "-m", "raycrawl", "warc", what, str(crawl)], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
        assert run.returncode == 0, run.stderr
    wet = sorted(layout(crawl).wet.glob("*.warc.wet.gz"))
    wat = sorted(layout(crawl).wat.glob("*.warc.wat.gz"))
    assert wet and wat
    work = tmp_path / "spark"
    work.mkdir()

    # word_count.py: word -> (term frequency, document frequency) over the WET files' pages
    tf: Counter[str] = Counter()
    df: Counter[str] = Counter()
    for body in html.values():
        words = Counter(w.lower() for w in WORD.findall(html_text(body, "text/html; charset=utf-8")))
        tf.update(words)
        df.update(words.keys())
    counted = {r["key"]: (r["val"]["tf"], r["val"]["df"]) for r in _rows(_spark_submit("word_count.py", wet, "wordcount", work))}
    assert len(counted) > 1000
    assert counted == {w: (tf[w], df[w]) for w in tf}

    # wat_extract_links.py, as it ships, runs its host-level job: (page's host, linked host) pairs,
    # hosts written backwards (SURT: com.example), "www." dropped, a host's links to itself left out
    pairs = {(r["s"], r["t"]) for r in _rows(_spark_submit("wat_extract_links.py", wat, "links", work))}
    parser = Parser()
    for url, body in html.items():
        me = _surt_host(url)
        targets = {t for s, t in pairs if s == me}
        links = parser.parse(exchange(url, body)).links  # the link records a crawl of it writes
        followed = {h for h in map(_surt_host, links) if h and h != me}
        assert links and followed <= targets, (url, sorted(followed - targets)[:5])  # every one found
        own = {h for v in _attribute_values(body) if re.match(r"(?:[a-z][a-z0-9]{1,5}:)?//", v, re.I)
               for h in [_surt_host(urljoin(url, v))] if h}
        assert targets <= own | {me}, (url, sorted(targets - own)[:5])  # none invented
    assert {s for s, _ in pairs} == {_surt_host(u) for u in html}  # every 200 HTML page's host, nothing else


def _surt_host(url: str) -> str | None:
    """A URL's host as cc-pyspark's host graph names it: lower-cased, a leading "www." dropped (when
    two labels remain), labels reversed; None for an address or a single label."""
    host = (urlsplit(url).hostname or "").rstrip(".")
    labels = host.split(".")
    if len(labels) < 2 or re.fullmatch(r"[\d.]+", host):
        return None
    if len(labels) > 2 and labels[0] == "www":
        labels = labels[1:]
    return ".".join(reversed(labels))
