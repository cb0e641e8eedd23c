"""What finding page requisites costs the parser (core/requisites.py): CPU per page with and
without it, on parse.py's synthetic 50 KB pages given a stylesheet, a script and 20 images each
with a srcset and a style attribute (the requisite finding replaced by a no-op for "without").

    .venv/bin/python benchmarks/requisites_parse.py [--pages 300]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import parse as base  # noqa: E402  (benchmarks/parse.py: the same synthetic pages)

import raycrawl.actors.visit.parser as parser_module  # noqa: E402
from raycrawl.exchange import FetchResult  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=300)
    args = ap.parse_args()
    rng = random.Random(1)
    images = b"".join(b'<img src="/i%d.png" srcset="/i%d@2x.png 2x" style="width:10px">' % (k, k) for k in range(20))
    pages = []
    for i in range(args.pages):
        body = base.make_page(rng, 50, i).replace(
            b"<body>", b'<body><link rel=stylesheet href=/s.css><script src=/a.js></script>' + images)
        pages.append(FetchResult(url=f"http://h{i % 100}.test/dir/p{i}.html", ip="127.0.0.1", status=200,
                                 headers={"content-type": "text/html"}, body=body, ctype="text/html", raw_headers=[]))
    parser = parser_module.Parser()

    def ms_per_page() -> float:
        t = time.process_time()
        for p in pages:
            parser.parse(p)
        return (time.process_time() - t) / len(pages) * 1000

    with_requisites = min(ms_per_page() for _ in range(3))
    found = len(parser.parse(pages[0]).embeds)
    real = parser_module.html_refs
    parser_module.html_refs = lambda tree: ([], [])
    try:
        without = min(ms_per_page() for _ in range(3))
    finally:
        parser_module.html_refs = real
    print(f"{args.pages} pages, {found} requisites each; CPU ms/page (best of 3)")
    print(f"  with page requisites     {with_requisites:.3f}")
    print(f"  without                  {without:.3f}")
    print(f"  ratio                    {with_requisites / without:.2f}×")


if __name__ == "__main__":
    main()
