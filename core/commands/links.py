"""``raycrawl links FILE.html --base URL``: the links the crawler would follow from a page."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from raycrawl.commands import _batch
from raycrawl.errors import UserError
from raycrawl.settings import Settings


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "links",
        help="the links the crawler would follow from an HTML file, with nofollow/noindex flags",
        description="Parse FILE as the crawler parses a fetched page of URL --base (charset from "
        "--encoding, else the page's own declaration) and print the canonical links it would follow, "
        "then the page's flags. See docs/fetching.md.",
    )
    p.add_argument("file", nargs="?", type=Path, help="the HTML file")
    p.add_argument("--base", help="the URL the page was fetched from")
    p.add_argument("--encoding", default=None, help="charset, as a Content-Type header would give it")
    p.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="a response header (X-Robots-Tag…); repeatable")
    p.add_argument("--user-agent", default=Settings().user_agent, help="whose meta/X-Robots-Tag apply")
    _batch.add_options(p, "print one JSON object",
                       '{"html": TEXT or "html_b64": BASE64, "base": URL, "encoding": ENC?, '
                       '"headers": [[NAME, VALUE], …]?} → {"links", "nofollow", "noindex", "canonical", "charset"}')
    p.set_defaults(func=handle)


def _parse(body: bytes, base: str, encoding: str | None, headers: list[tuple[str, str]], ua: str) -> dict[str, Any]:
    from raycrawl.actors.visit.parser import Parser
    from raycrawl.exchange import FetchResult
    from raycrawl.urls import canonicalize

    url = canonicalize(base)
    if url is None:
        raise _batch.BadRequest(f"base is not an http(s) URL: {base!r}")
    ctype = "text/html" + (f"; charset={encoding}" if encoding else "")
    raw = [(b"Content-Type", ctype.encode())] + [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
                                                  for k, v in headers]
    hdrs: dict[str, str] = {}
    for k, v in raw:
        key = k.decode("latin-1").lower()
        hdrs[key] = f"{hdrs[key]}, {v.decode('latin-1')}" if key in hdrs else v.decode("latin-1")
    fr = FetchResult(url=url, ip="", status=200, headers=hdrs, body=body, ctype="text/html", raw_headers=raw)
    r = Parser(ua).parse(fr)
    return {"base": url, "links": r.links, "nofollow": r.nofollow, "noindex": r.noindex,
            "canonical": r.canonical, "charset": r.charset}


def _header(h: Any) -> tuple[str, str]:
    if isinstance(h, str) and ":" in h:
        name, _, value = h.partition(":")
        return name.strip(), value.strip()
    if isinstance(h, list | tuple) and len(h) == 2 and all(isinstance(x, str) for x in h):
        return h[0], h[1]
    raise _batch.BadRequest(f"a header is 'Name: value' or [name, value], not {h!r}")


def handle(args: argparse.Namespace) -> int:
    if args.batch:
        def answer(obj: dict[str, Any]) -> dict[str, Any]:
            headers = [_header(h) for h in _batch.field(obj, "headers", [])]
            return _parse(_batch.text_or_b64(obj, "html"), str(_batch.field(obj, "base")),
                          _batch.field(obj, "encoding", None), headers, args.user_agent)

        return _batch.run(answer)
    if args.file is None or not args.base:
        raise UserError("give FILE and --base URL (or --batch)")
    try:
        body = args.file.read_bytes()
        reply = _parse(body, args.base, args.encoding, [_header(h) for h in args.header], args.user_agent)
    except OSError as exc:
        raise UserError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except _batch.BadRequest as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps(reply, ensure_ascii=False))
        return 0
    for link in reply["links"]:
        print(link)
    flags = [name for name in ("nofollow", "noindex") if reply[name]]
    print(f"# {len(reply['links'])} links; charset {reply['charset'] or '-'}"
          + (f"; {', '.join(flags)}" if flags else "")
          + (f"; canonical {reply['canonical']}" if reply["canonical"] else ""))
    return 0
