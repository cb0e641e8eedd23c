"""Parser and WARC-writer throughput, side by side with Scrapy's and warcio's, in the same run.

    .venv/bin/python benchmarks/parse.py [--pages 1000] [--kb 50] [--seed 1]

Parsing: raycrawl's Parser (links + title + visible text + digest, one lexbor parse) vs Scrapy's
``LinkExtractor`` (lxml; links only) on the same synthetic pages; also raycrawl links-only time
(``Parser`` with the text step skipped is not a public mode, so we report the full parse).
Both sides must agree on the set of links of every page (checked).

WARC: ``storage.warc.WarcStore`` (fastwarc, one gzip member per record, digests) vs warcio's
``WARCWriter`` (gzip, digests) writing the same request+response pairs.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raycrawl.actors.visit.parser import Parser  # noqa: E402
from raycrawl.exchange import FetchResult  # noqa: E402
from raycrawl.storage.warc import WarcStore, response_head  # noqa: E402

WORDS = ["crawler", "archive", "summary", "graph", "index", "spam", "rank", "focus", "page", "link", "host", "robot", "fetch", "parse", "store", "sieve", "workbench", "frontier", "politeness", "delay", "agent"]


def make_page(rng: random.Random, kb: int, i: int) -> bytes:
    # A site menu shared by the pages of a host (as on real sites), then random content and links.
    nav = "".join(f'<a href="/section{k}/">{WORDS[k % len(WORDS)]}</a>' for k in range(25))
    parts = [f"<html><head><title>Page {i} {rng.choice(WORDS)}</title><style>p{{color:red}}</style></head><body>"
             f"<nav>{nav}</nav>"]
    size = 0
    while size < kb * 1024:
        r = rng.random()
        if r < 0.25:
            href = rng.choice([f"/p{rng.randrange(10**6)}", f"../d{rng.randrange(100)}/x.html",
                               f"http://h{rng.randrange(1000)}.test/a?b={rng.randrange(50)}", f"q{rng.randrange(999)}#f"])
            s = f'<a href="{href}">{" ".join(rng.choices(WORDS, k=3))}</a> '
        elif r < 0.3:
            s = "<script>var x = 1; function f() { return x; }</script>"
        else:
            s = "<p>" + " ".join(rng.choices(WORDS, k=rng.randrange(5, 40))) + "</p>\n"
        parts.append(s)
        size += len(s)
    parts.append("</body></html>")
    return "".join(parts).encode()


def clock() -> float:
    """CPU seconds of this process: the machine is shared, wall time is noisy."""
    return time.process_time()


def bench_parse(pages: list[FetchResult]) -> tuple[float, float, int]:
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    from raycrawl.urls import canonicalize

    parser = Parser()
    t0 = clock()
    ours = [parser.parse(fr) for fr in pages]
    t_ours = clock() - t0

    extractor = LinkExtractor(deny_extensions=[], unique=True, canonicalize=False)
    responses = [HtmlResponse(url=fr.url, body=fr.body, encoding="utf-8") for fr in pages]
    t0 = clock()
    theirs = [extractor.extract_links(resp) for resp in responses]
    t_scrapy = clock() - t0

    mismatches = 0
    for o, t in zip(ours, theirs, strict=True):
        if set(o.links) != {canonicalize(link.url) for link in t}:
            mismatches += 1
    return t_ours, t_scrapy, mismatches


def bench_warc(pages: list[FetchResult]) -> tuple[float, float, int, int]:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with tempfile.TemporaryDirectory() as d:
        store = WarcStore(d, "bench")
        t0 = clock()
        for fr in pages:
            store.write(fr)
        store.close()
        t_ours = clock() - t0
        ours_bytes = sum(p.stat().st_size for p in Path(d).glob("*.warc.gz"))

    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    t0 = clock()
    for fr in pages:
        req_head = fr.request_head.decode("latin-1").split("\r\n")
        req = StatusAndHeaders(req_head[0], [tuple(h.split(": ", 1)) for h in req_head[1:] if h], protocol="")
        rec_req = writer.create_warc_record(fr.url, "request", http_headers=req, payload=io.BytesIO(b""))
        head = response_head(fr).decode("latin-1").split("\r\n")
        status = StatusAndHeaders(head[0].split(" ", 1)[1], [tuple(h.split(": ", 1)) for h in head[1:] if h],
                                  protocol="HTTP/1.1")
        rec = writer.create_warc_record(fr.url, "response", payload=io.BytesIO(fr.body), http_headers=status,
                                        warc_headers_dict={"WARC-IP-Address": fr.ip})
        writer.write_record(rec_req)
        writer.write_record(rec)
    t_warcio = clock() - t0
    return t_ours, t_warcio, ours_bytes, len(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--kb", type=int, default=50, help="approximate page size")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pages = []
    for i in range(args.pages):
        body = make_page(rng, args.kb, i)
        pages.append(FetchResult(
            url=f"http://h{i % 100}.test/dir/p{i}.html", ip="127.0.0.1", status=200,
            headers={"content-type": "text/html; charset=utf-8"}, body=body, ctype="text/html",
            started=time.time(), ended=time.time(), status_line="HTTP/1.1 200 OK",
            raw_headers=[(b"Content-Type", b"text/html; charset=utf-8"), (b"Content-Length", str(len(body)).encode())],
            request_head=f"GET /dir/p{i}.html HTTP/1.1\r\nHost: h{i % 100}.test\r\nUser-Agent: bench\r\n\r\n".encode()))
    mb = sum(len(p.body) for p in pages) / 1e6
    print(f"{args.pages} pages, {mb:.1f} MB of HTML (~{args.kb} KB each); 2-core machine shared with other jobs: noisy")

    t_ours, t_scrapy, mismatches = bench_parse(pages)
    print("(times are CPU seconds of this process, so other jobs on the machine matter less)")
    print("\nparsing                         pages/s     ms/page")
    print(f"raycrawl Parser (links+text+digest) {args.pages / t_ours:9.0f} {1000 * t_ours / args.pages:10.3f}")
    print(f"Scrapy LinkExtractor (links only)   {args.pages / t_scrapy:9.0f} {1000 * t_scrapy / args.pages:10.3f}")
    print(f"ratio raycrawl/Scrapy pages/s: {t_scrapy / t_ours:.2f}x   pages whose link sets differ: {mismatches}")

    t_ours, t_warcio, b_ours, b_warcio = bench_warc(pages)
    print("\nWARC writing (request+response)  records/s   MB/s     file MB")
    print(f"raycrawl WarcStore (fastwarc)    {2 * args.pages / t_ours:9.0f} {mb / t_ours:7.1f} {b_ours / 1e6:10.2f}")
    print(f"warcio WARCWriter                {2 * args.pages / t_warcio:9.0f} {mb / t_warcio:7.1f} {b_warcio / 1e6:10.2f}")
    print(f"ratio raycrawl/warcio records/s: {t_warcio / t_ours:.2f}x")


if __name__ == "__main__":
    main()
