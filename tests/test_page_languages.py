"""Languages of real pages (storage/wet.py, issue 54): 32 pages of real sites in 8 languages
(tests/data/readability-pages, with their known languages) are ≥ 95 % detected as their known
language from the text their WET record holds; and so they are when websim serves them beside its
own pages and a crawl fetches them."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_cc_index import CRAWL, ccindex, published

PAGES = Path(__file__).parent / "data" / "readability-pages"
ROOT = Path(__file__).resolve().parents[1]


def test_real_pages_languages_are_their_known_ones() -> None:
    import pycountry

    from raycrawl.storage.wet import html_text, languages

    rows = [line.split("\t") for line in (PAGES / "languages.tsv").read_text().splitlines() if not line.startswith("#")]
    wrong = []
    for name, known, _ in rows:
        text = html_text(gzip.decompress((PAGES / f"{name}.html.gz").read_bytes()), "text/html")
        got = languages(text)
        if got != (pycountry.languages.get(alpha_2=known).alpha_3,):
            wrong.append((name, known, got))
    assert len(rows) == 32 and len({known for _, known, _ in rows}) == 8
    assert len(wrong) <= 0.05 * len(rows), wrong


@pytest.mark.slow
def test_websim_serves_the_real_pages_and_a_crawl_gives_each_its_language(tmp_path) -> None:
    """websim serves the real pages beside its generated ones (``real_pages``: a host of their own,
    its robots.txt allowing them and its home page only): a crawl fetches every one of them,
    websim's audit finds no violation (none of the links inside the real pages is followed to
    this web), and the columnar index ``warc cc-index`` writes gives ≥ 95 % of them the language
    the manifest knows; Common Crawl's published DuckDB queries, run unchanged on that index, and
    its counts by host and type, count what crawl.log counts."""
    import pyarrow.parquet as pq
    import pycountry

    from raycrawl.websim import Websim
    from raycrawl.websim.audit import is_robots_path

    out = tmp_path / "crawl"
    with Websim(hosts=12, ips=2, seed=5, pages_per_host_mean=3, real_pages=PAGES, slow_delay=0.3,
                out_dir=tmp_path / "web") as web:
        crawl = subprocess.run(
            [sys.executable, "-m", "raycrawl", "crawl", "--seeds", str(web.seeds_file), "--out", str(out),
             "--dns-server", "{}:{}".format(*web.dns_address), "--allow-networks", "127.0.0.0/8",
             "--host-delay", "0.05", "--ip-delay", "0.01", "--read-timeout", "3", "--max-retries", "1",
             "--retry-backoff", "0.5", "--max-urls-per-host", "40"],
            capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert crawl.returncode == 0, crawl.stderr[-3000:]
        web.flush_log()
        report = web.audit(0.05, 0.01)
        assert report.ok, report.summary()
        answered = {f"http://{r.host}{r.target}" for r in web.requests() if r.status == 200}
        robots_answered = sum(is_robots_path(r.target) and r.status > 0 for r in web.requests())
        real = {url: next(lab[5:] for lab in rec["labels"] if lab.startswith("lang:"))
                for url, rec in web.manifest.pages.items() if rec["kind"] == "real"}
    assert len(real) == 32 and set(real) <= answered, sorted(set(real) - answered)[:5]
    index = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "cc-index", str(out), "--crawl", CRAWL],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert index.returncode == 0, index.stderr[-3000:]
    rows = pq.read_table(out / "cc-index" / "table", columns=["url", "content_languages"]).to_pylist()
    got = {r["url"]: r["content_languages"] for r in rows if r["url"] in real}
    assert set(got) == set(real)
    wrong = {u: (known, got[u]) for u, known in real.items() if got[u] != pycountry.languages.get(alpha_2=known).alpha_3}
    assert len(wrong) <= 0.05 * len(real), wrong

    # Common Crawl's published queries, unchanged, and the same counts by host and type, count what
    # crawl.log counts. Its lines (time, status, size, URL, path, via, type, …, annotations, extra
    # info) name the WARC record of each capture; a body cut short has a negative status and a
    # …Trunc annotation (Common Crawl keeps those among the pages, content_truncated set). A
    # robots.txt fetch has no line: websim's log counts those, redirects it followed included.
    db = ccindex(out)
    archived = {}
    for line in (out / "crawl.log").read_text().splitlines():
        f, extra = line.split(), json.loads(line[line.index("{"):])
        if "warcFilename" in extra:
            page = f[1] == "200" or (int(f[1]) < 0 and f[-2].endswith("Trunc"))
            archived[extra["warcFilename"], extra["warcFileOffset"]] = (f, "warc" if page else "crawldiagnostics")
    indexed = {(w, o): subset for w, o, subset in db.execute(
        "SELECT warc_filename, warc_record_offset, subset FROM ccindex.ccindex WHERE subset != 'robotstxt'").fetchall()}
    assert indexed == {k: subset for k, (_, subset) in archived.items()}
    pages = [f for f, subset in archived.values() if subset == "warc"]
    diagnostics = Counter(int(f[1]) for f, subset in archived.values() if subset == "crawldiagnostics")
    partitions = {"warc": len(pages), "robotstxt": robots_answered, "crawldiagnostics": sum(diagnostics.values())}
    assert sorted(published(db, "count-by-partition")) == sorted(
        (n, CRAWL, subset) for subset, n in partitions.items() if n)
    assert sorted(published(db, "count-fetch-status")) == sorted(
        (n, status) for status, n in diagnostics.items())

    def counted(column: str) -> dict:
        return dict(db.execute(f"SELECT {column}, COUNT(*) FROM ccindex.ccindex WHERE subset = 'warc' "
                               f"GROUP BY {column}").fetchall())

    assert counted("url_host_name") == Counter(urlsplit(f[3]).hostname for f in pages)
    # (a revisit record is typed warc/revisit in theirs: crawl.log says warcRevisit)
    assert counted("content_mime_type") == Counter("warc/revisit" if "warcRevisit:" in f[-2] else f[6] for f in pages)
