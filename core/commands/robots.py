"""``raycrawl robots check --user-agent UA ROBOTS_FILE URL…``: what robots.txt says for a URL, and why."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from raycrawl.commands import _batch
from raycrawl.errors import UserError
from raycrawl.settings import Settings


def register(subparsers) -> None:
    p = subparsers.add_parser("robots", help="robots.txt tools (RFC 9309, as the crawler reads it)",
                              description="robots.txt tools. See docs/fetching.md.")
    sub = p.add_subparsers(dest="robots_command", metavar="SUBCOMMAND", required=True)
    c = sub.add_parser(
        "check",
        help="verdict and deciding rule for URLs",
        description="Print allowed/disallowed for each URL under ROBOTS_FILE (read as the crawler reads "
        "a robots.txt answered with --status), with the rule that decided it. URLs are canonicalised "
        "first, as the crawler requests them. Exit 1 if any URL is disallowed.",
    )
    c.add_argument("robots_file", nargs="?", type=Path, help="the robots.txt body")
    c.add_argument("urls", nargs="*", metavar="URL")
    c.add_argument("--user-agent", default=Settings().user_agent,
                   help="User-Agent whose product token selects the group (default: the crawler's)")
    c.add_argument("--status", type=int, default=200,
                   help="HTTP status the robots.txt came with (4xx: allow all; 429/5xx: disallow all)")
    _batch.add_options(c, "one JSON object per URL",
                       '{"robotstxt": TEXT or "robotstxt_b64": BASE64, "url": URL, '
                       '"user_agent": UA?, "status": N?} → {"url", "canonical", "allowed", "rule", "not_crawlable", "error"}')
    c.set_defaults(func=handle_check)


def _verdict(body: bytes, url: str, user_agent: str, status: int) -> dict[str, Any]:
    from raycrawl.policies.robots import RobotsRules
    from raycrawl.urls import explain

    canonical, why = explain(url)
    rules = RobotsRules.from_response(status, body, user_agent, now=0.0, ttl=1.0)
    # A URL the crawler would never request is still judged as written, with the reason noted.
    target = canonical or url
    return {"url": url, "canonical": canonical, "allowed": rules.allowed(target),
            "rule": rules.decided_by(target), "error": None, "not_crawlable": why or None}


def handle_check(args: argparse.Namespace) -> int:
    if not 100 <= args.status <= 599:
        raise UserError(f"--status must be an HTTP status (100-599), not {args.status}")
    if args.batch:
        def answer(obj: dict[str, Any]) -> dict[str, Any]:
            status = _batch.field(obj, "status", 200)
            ua = _batch.field(obj, "user_agent", args.user_agent)
            url = _batch.field(obj, "url")
            if not isinstance(status, int) or not isinstance(ua, str) or not isinstance(url, str):
                raise _batch.BadRequest("status must be an integer, user_agent and url strings")
            return _verdict(_batch.text_or_b64(obj, "robotstxt"), url, ua, status)

        return _batch.run(answer)
    if args.robots_file is None or not args.urls:
        raise UserError("give ROBOTS_FILE and at least one URL (or --batch)")
    try:
        body = args.robots_file.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {args.robots_file}: {exc.strerror or exc}") from None
    disallowed = 0
    for url in args.urls:
        v = _verdict(body, url, args.user_agent, args.status)
        disallowed += v["allowed"] is not True
        if args.json:
            print(json.dumps(v, ensure_ascii=False))
        else:
            note = f"; not a crawlable URL: {v['not_crawlable']}" if v["not_crawlable"] else ""
            print(f"{'allowed' if v['allowed'] else 'disallowed':<11} {v['canonical'] or url}  ({v['rule']}{note})")
    return 1 if disallowed else 0
