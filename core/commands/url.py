"""``raycrawl url [BASE] HREF…``: the canonical URL the crawler would use for a link, or why not."""

from __future__ import annotations

import argparse
import json
from typing import Any

from raycrawl.commands import _batch
from raycrawl.urls import explain


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "url",
        help="resolve and canonicalise URLs as the crawler does (WHATWG URL Standard + canonical form)",
        description="Print the canonical URL of each HREF resolved against BASE (as a link on the page "
        "BASE), or 'rejected: WHY'. With one argument it is an absolute URL. See docs/fetching.md.",
    )
    p.add_argument("urls", nargs="*", metavar="[BASE] HREF", help="base URL, then references")
    p.add_argument("--encoding", default=None,
                   help="the page's character encoding (a query is percent-encoded in it, as browsers do)")
    _batch.add_options(p, "one JSON object per HREF",
                       '{"input": HREF, "base": BASE or null, "encoding": ENC?} → '
                       '{"input", "base", "canonical", "error"}')
    p.set_defaults(func=handle)


def _answer(obj: dict[str, Any]) -> dict[str, Any]:
    href, base, enc = _batch.field(obj, "input"), _batch.field(obj, "base", None), _batch.field(obj, "encoding", None)
    if not isinstance(href, str) or not (base is None or isinstance(base, str)):
        raise _batch.BadRequest("input and base must be strings (base may be null)")
    canonical, why = explain(href, base, enc)
    return {"input": href, "base": base, "canonical": canonical, "error": why or None}


def handle(args: argparse.Namespace) -> int:
    if args.batch:
        return _batch.run(_answer)
    if not args.urls:
        from raycrawl.errors import UserError

        raise UserError("give a URL, or a base URL and references (or --batch)")
    base, hrefs = (None, args.urls) if len(args.urls) == 1 else (args.urls[0], args.urls[1:])
    rejected = 0
    for href in hrefs:
        reply = _answer({"input": href, "base": base, "encoding": args.encoding})
        rejected += reply["canonical"] is None
        if args.json:
            print(json.dumps(reply, ensure_ascii=False))
        else:
            print(reply["canonical"] or f"rejected: {reply['error']}: {href}")
    return 1 if rejected else 0
