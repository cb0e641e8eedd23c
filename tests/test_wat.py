"""WAT files (storage/wat.py, issue 54, part): one metadata record per WARC record, read back with
warcio (digests checked) and fastwarc; a page's links as Common Crawl's WAT gives them, read the way
cc-pyspark's ``wat_extract_links`` reads them, are the page's links, and those a crawl follows are
the parser's link records, none invented."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin

from test_warc import exchange
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from raycrawl.storage.warc import WarcStore
from raycrawl.storage.wat import WAT_SUFFIX

ROOT = Path(__file__).resolve().parents[1]
PAGE = b"""<!doctype html><html><head><title>Links  page</title><base href="http://a.test/docs/">
<meta name="description" content="A page of links"><meta property="og:url" content="http://a.test/canonical">
<link rel="stylesheet" href="../s.css"><script src="/app.js"></script></head>
<body><p>See <a href="one.html" title="first">the first</a>, <a href="http://b.test/two">another host</a>,
<a href="../up#frag">up</a>, <a rel="nofollow" href="/ads">an ad</a>,
<img src="pic.png" alt="a picture"> <iframe src="frame.html"></iframe> <area href="/map">
<form action="/search"><input name=q></form></p></body></html>"""


def cc_pyspark_links(url: str, record: dict) -> list[str]:
    """What cc-pyspark's ExtractLinksJob.get_links yields for a WAT record (its code's logic: the
    head's links, the og:url metas, then the body's links, each joined to the base)."""
    meta = record["Envelope"]["Payload-Metadata"]["HTTP-Response-Metadata"]
    if "HTML-Metadata" not in meta:
        return []
    html, base, out = meta["HTML-Metadata"], None, []
    head = html.get("Head", {})
    if "Base" in head:
        base = urljoin(url, head["Base"])
    found = [*head.get("Link", []), *[m for m in head.get("Metas", []) if m.get("property") == "og:url"],
             *html.get("Links", [])]
    for link in found:
        if "url" in link:
            out.append(urljoin(base or url, link["url"]))
    return out


def test_wat_records_give_each_records_metadata_and_a_pages_links(tmp_path) -> None:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from raycrawl.actors.visit.parser import Parser

    crawl = tmp_path / "crawl"
    store = WarcStore(crawl / "warc", "agent0")
    fr = exchange("http://a.test/docs/page.html", PAGE)
    store.write(fr)
    store.write(exchange("http://a.test/gone", b"no", status=404))
    store.close()
    (warc,) = (crawl / "warc").glob("*.warc.gz")
    ids = []
    with open(warc, "rb") as fh:
        for rec in WarcioIterator(fh):
            ids.append((rec.rec_type, rec.rec_headers.get_header("WARC-Record-ID")))

    run = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "wat", str(crawl)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    wat = crawl / "wat" / (warc.name[: -len(".warc.gz")] + WAT_SUFFIX)
    assert f"{len(ids)} records in 1 WAT files" in run.stdout, run.stdout
    described, docs = [], {}
    with open(wat, "rb") as fh:
        for rec in WarcioIterator(fh, check_digests=True):
            body = rec.content_stream().read()
            assert rec.digest_checker.passed is not False
            if rec.rec_type == "metadata":
                assert rec.rec_headers.get_header("Content-Type") == "application/json"
                doc = json.loads(body)
                header = doc["Envelope"]["WARC-Header-Metadata"]
                assert header["WARC-Record-ID"] == rec.rec_headers.get_header("WARC-Refers-To")
                described.append((header["WARC-Type"], header["WARC-Record-ID"]))
                docs[(header["WARC-Type"], header.get("WARC-Target-URI"))] = doc
    assert described == ids  # every record of the WARC file, in its order
    page = docs[("response", "http://a.test/docs/page.html")]
    http = page["Envelope"]["Payload-Metadata"]["HTTP-Response-Metadata"]
    assert http["Response-Message"] == {"Version": "HTTP/1.1", "Status": "200", "Reason": "OK"}
    head = http["HTML-Metadata"]["Head"]
    assert head["Title"] == "Links page" and {"name": "description", "content": "A page of links"} in head["Metas"]
    paths = sorted((link["path"], link["url"]) for link in http["HTML-Metadata"]["Links"])
    assert paths == [("A@/href", "../up#frag"), ("A@/href", "/ads"), ("A@/href", "http://b.test/two"),
                     ("A@/href", "one.html"), ("AREA@/href", "/map"), ("FORM@/action", "/search"),
                     ("IFRAME@/src", "frame.html"), ("IMG@/src", "pic.png")]
    # (cc-pyspark reads no Head.Scripts, and an og:url meta has its address in "content", not "url")
    assert sorted(cc_pyspark_links("http://a.test/docs/page.html", page)) == sorted([
        "http://a.test/s.css", "http://a.test/docs/one.html",
        "http://b.test/two", "http://a.test/up#frag", "http://a.test/ads", "http://a.test/docs/pic.png",
        "http://a.test/docs/frame.html", "http://a.test/map", "http://a.test/search"])
    # The links a crawl follows (a, area, iframe, frame; not rel=nofollow) are the parser's link records'.
    followed = {urljoin("http://a.test/docs/", link["url"]).split("#")[0] for link in http["HTML-Metadata"]["Links"]
                if link["path"] in ("A@/href", "AREA@/href", "IFRAME@/src", "FRAME@/src") and link.get("rel") != "nofollow"}
    assert followed == set(Parser().parse(fr).links)
    assert "HTML-Metadata" not in docs[("response", "http://a.test/gone")]["Envelope"]["Payload-Metadata"][
        "HTTP-Response-Metadata"]
    request = docs[("request", "http://a.test/docs/page.html")]["Envelope"]["Payload-Metadata"]
    assert request["HTTP-Request-Metadata"]["Request-Message"]["Method"] == "GET"
    with open(wat, "rb") as fh:
        checked = [r.verify_block_digest() for r in ArchiveIterator(fh, record_types=WarcRecordType.metadata)]
    assert checked == [True] * len(ids)
