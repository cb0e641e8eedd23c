"""WET files (storage/wet.py, issue 54, part): one conversion record per HTML page answered 200, read
back with warcio (digests checked) and fastwarc, each pointing at its response and giving its text
and its language."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_warc import exchange
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from raycrawl.storage.warc import WarcStore
from raycrawl.storage.wet import WET_SUFFIX

ROOT = Path(__file__).resolve().parents[1]

GERMAN = ("Die Bundesregierung hat am Mittwoch beschlossen, die Förderung für erneuerbare Energien deutlich "
          "auszubauen. Nach Angaben des Ministeriums sollen in den kommenden Jahren zusätzliche Mittel "
          "bereitgestellt werden.")
ENGLISH = ("The government announced on Wednesday that it would significantly expand funding for renewable "
           "energy. According to the ministry, additional resources will be made available in the coming years.")


def page(title: str, text: str, charset: str = "utf-8") -> bytes:
    return (f"<!doctype html><html><head><meta charset={charset}><title>{title}</title>"
            f"<script>var hidden = 'not text';</script></head><body><nav><a href=/>Home</a></nav>"
            f"<article><h1>{title}</h1><p>{text}</p></article></body></html>").encode(charset)


def test_wet_records_of_the_html_pages_read_by_warcio_and_fastwarc(tmp_path) -> None:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    crawl = tmp_path / "crawl"
    store = WarcStore(crawl / "warc", "agent0")
    german = exchange("http://a.test/de", page("Energie", GERMAN, "iso-8859-1"))  # (its charset from HTTP)
    german.raw_headers = [(b"Content-Type", b"text/html; charset=iso-8859-1")]
    german.headers = {"content-type": "text/html; charset=iso-8859-1"}
    store.write(german)
    store.write(exchange("http://a.test/en", page("Energy", ENGLISH)))
    store.write(exchange("http://a.test/gone", page("Gone", ENGLISH), status=404))
    store.write(exchange("http://a.test/robots.txt", page("Robots", ENGLISH)))  # (served as HTML: still no page)
    image = exchange("http://a.test/i.png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    image.headers, image.ctype = {"content-type": "image/png"}, "image/png"
    image.raw_headers = [(b"Content-Type", b"image/png")]
    store.write(image)
    store.close()
    (warc,) = (crawl / "warc").glob("*.warc.gz")
    responses = {}
    with open(warc, "rb") as fh:
        for rec in WarcioIterator(fh):
            if rec.rec_type == "response":
                responses[rec.rec_headers.get_header("WARC-Target-URI")] = rec.rec_headers.get_header("WARC-Record-ID")

    run = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "wet", str(crawl)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    wet = crawl / "wet" / (warc.name[: -len(".warc.gz")] + WET_SUFFIX)
    assert "2 pages in 1 WET files" in run.stdout and wet.exists(), run.stdout
    got = {}
    with open(wet, "rb") as fh:
        it = WarcioIterator(fh, check_digests=True)
        types = []
        for rec in it:
            types.append(rec.rec_type)
            text = rec.content_stream().read().decode("utf-8")
            assert rec.digest_checker.passed is not False
            if rec.rec_type == "conversion":
                h = rec.rec_headers
                assert h.get_header("Content-Type") == "text/plain"
                got[h.get_header("WARC-Target-URI")] = (h.get_header("WARC-Refers-To"),
                                                        h.get_header("WARC-Identified-Content-Language"), text)
    assert types == ["warcinfo", "conversion", "conversion"]
    assert set(got) == {"http://a.test/de", "http://a.test/en"}  # not the 404, not robots.txt, not the image
    for url, (refers_to, _lang, text) in got.items():
        assert refers_to == responses[url]
        assert "not text" not in text and "Home" not in text  # scripts and navigation are not the page's text
    assert got["http://a.test/de"][1] == "deu" and GERMAN in got["http://a.test/de"][2]  # decoded as Latin-1
    assert got["http://a.test/en"][1] == "eng" and ENGLISH in got["http://a.test/en"][2]
    with open(wet, "rb") as fh:
        checked = [r.verify_block_digest() for r in ArchiveIterator(fh, record_types=WarcRecordType.conversion)]
    assert checked == [True, True]


def test_a_damaged_record_costs_only_itself(tmp_path) -> None:
    """A WARC file damaged in the middle (bytes overwritten inside one page's record): the WET file
    has every other page, and the command says where the damage was, without a traceback."""
    crawl = tmp_path / "crawl"
    store = WarcStore(crawl / "warc", "agent0")
    offsets = [store.write(exchange(f"http://a.test/{i}", page(f"Page {i}", ENGLISH)))[1] for i in range(3)]
    store.close()
    (warc,) = (crawl / "warc").glob("*.warc.gz")
    data = bytearray(warc.read_bytes())
    middle = (offsets[1] + offsets[2]) // 2
    data[middle:middle + 64] = bytes(64)
    warc.write_bytes(bytes(data))
    run = subprocess.run([sys.executable, "-m", "raycrawl", "warc", "wet", str(crawl)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "damaged record" in run.stderr, run.stderr
    wet = next((crawl / "wet").glob("*" + WET_SUFFIX))
    with open(wet, "rb") as fh:
        urls = [r.rec_headers.get_header("WARC-Target-URI") for r in WarcioIterator(fh) if r.rec_type == "conversion"]
    assert urls == ["http://a.test/0", "http://a.test/2"]
