"""``raycrawl serve DIR``: a small search page over DIR/index (aiohttp, loopback by default).

``GET /?q=words[&version=K][&or=1][&t1=E1&t2=E2]`` shows the top results with URL, snippet, the
matching versions (epoch and score), PageRank and spam score; ``GET /api?q=…`` returns the same as
JSON. See docs/search.md.
"""

from __future__ import annotations

import argparse
import html
import logging
import re
from pathlib import Path

from raycrawl.argtypes import port
from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import index_dir as crawl_index_dir

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a search page over DIR/index",
                              description="A small web page for searching a crawl's fragment index (docs/search.md).")
    p.add_argument("dir", type=Path, help="crawl directory holding index/ (or an index directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port, default=8080, help="port (default 8080; 0 = any free port)")
    p.set_defaults(func=handle)


def _int(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as e:
        raise UserError(f"{name} must be an integer") from e


def results(index, index_dir: Path, params) -> dict:
    """The JSON answer for query parameters ``params`` (UserError for bad ones)."""
    from raycrawl.commands.search import run_query, run_temporal

    q = params.get("q", "").strip()
    if not q:
        return {"query": "", "results": []}
    version = _int(params.get("version"), "version")
    t1, t2 = _int(params.get("t1"), "t1"), _int(params.get("t2"), "t2")
    k = _int(params.get("k"), "k") or 10
    if t1 is not None and t2 is not None:
        (top, edges), qterms = run_temporal(index, index_dir, q, t1, t2, k, params.get("method", "pagerank"), 0.5)
        return {"query": q, "terms": qterms, "temporal": [t1, t2], "edges": [[index.urls[u], index.urls[v]] for u, v in edges],
                "results": [{"url": h.url, "score": h.score, "ir": h.ir, "change": h.change,
                             "snippet": _snip(index, h.page, qterms), "pagerank": index.pagerank[h.page],
                             "spam": index.spam[h.page], "versions": []} for h in top]}
    hits, qterms, _ = run_query(index, q, k, params.get("or") in ("1", "on", "true"), version)
    return {"query": q, "terms": qterms, "results": [
        {"url": h.url, "score": h.score, "snippet": _snip(index, h.page, qterms), "pagerank": h.pagerank, "spam": h.spam,
         "versions": [{"epoch": v.epoch, "score": v.score} for v in h.versions]} for h in hits]}


def _snip(index, page: int, qterms: list[str], width: int = 240) -> str:
    """About ``width`` characters of the page's stored text around the first query-word match."""
    text = index.snippets[page] if page < len(index.snippets) else ""
    low = text.lower()
    hits = [i for i in (low.find(t) for t in qterms) if i >= 0]
    start = max(0, min(hits) - width // 3) if hits else 0
    cut = text[start: start + width]
    return ("… " if start else "") + cut + (" …" if start + width < len(text) else "")


def render_page(answer: dict, error: str | None = None) -> str:
    """The HTML page (every user-controlled string escaped)."""
    esc = html.escape
    q = answer.get("query", "")
    words = [w for w in answer.get("terms", []) if w]
    mark = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\w*", re.I) if words else None
    rows = []
    for r in answer.get("results", []):
        snippet = esc(r["snippet"])
        if mark is not None:
            snippet = mark.sub(lambda m: f"<mark>{m.group(0)}</mark>", snippet)
        meta = [f"score {r['score']:.3f}"]
        # Always shown; "–" when the index has none (built before ``raycrawl rank`` / ``spam score``).
        meta.append("PageRank " + (f"{r['pagerank']:.3g}" if r.get("pagerank") is not None else "–"))
        meta.append("spam " + (f"{r['spam']:.2f}" if r.get("spam") is not None else "–"))
        if "change" in r:
            meta.append(f"change {r['change']:.3f}")
        versions = ", ".join(f"epoch {v['epoch']} ({v['score']:.2f})" for v in r.get("versions", []))
        rows.append(f'<li class="hit"><a class="url" href="{esc(r["url"], quote=True)}">{esc(r["url"])}</a>'
                    f'<div class="snippet">{snippet}</div><div class="meta">{esc(" · ".join(meta))}</div>'
                    + (f'<div class="versions">versions: {esc(versions)}</div>' if versions else "") + "</li>")
    body = (f'<p class="error">{esc(error)}</p>' if error else
            (f"<p>{len(rows)} result(s)</p><ol>{''.join(rows)}</ol>" if q else ""))
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>raycrawl search</title>"
            "<style>body{font-family:sans-serif;margin:1em 2em}li.hit{margin:.8em 0}"
            ".meta,.versions{color:#555;font-size:90%}.error{color:#b00}</style></head><body>"
            f'<form method="get" action="/"><input name="q" value="{esc(q, quote=True)}" size="40">'
            '<input name="version" placeholder="epoch" size="5"><label><input type="checkbox" name="or" value="1">'
            " any word</label> <button>search</button></form>" + body + "</body></html>")


def make_app(crawl_dir: Path):
    """The aiohttp application serving ``crawl_dir``'s index (loaded once)."""
    from aiohttp import web

    from raycrawl.commands.search import open_index

    index = open_index(crawl_dir)
    index_dir = crawl_index_dir(crawl_dir)

    async def page(request: web.Request) -> web.Response:
        try:
            answer, error = results(index, index_dir, request.query), None
        except UserError as e:
            answer, error, = {"query": request.query.get("q", "")}, str(e)
        return web.Response(text=render_page(answer, error), content_type="text/html", status=400 if error else 200)

    async def api(request: web.Request) -> web.Response:
        try:
            return web.json_response(results(index, index_dir, request.query))
        except UserError as e:
            return web.json_response({"error": str(e)}, status=400)

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/api", api)
    return app


def _check_bind(host: str, port_: int) -> None:
    """The address can be bound (the machine has it, the port is free), or one clear line."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port_, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port_}: {exc.strerror or exc}") from None


def handle(args: argparse.Namespace) -> int:
    from aiohttp import web

    app = make_app(args.dir)
    _check_bind(args.host, args.port)
    print(f"serving {args.dir} on http://{args.host}:{args.port}/ (Ctrl-C stops)")
    web.run_app(app, host=args.host, port=args.port, print=None)
    return 0
