"""``raycrawl serve DIR``: a small search page over DIR/index (aiohttp, loopback by default).

``GET /?q=words[&version=K][&or=1][&t1=E1&t2=E2&method=M][&page=N]`` shows a page of results: title
(linked to the latest archived capture), URL, snippet, PageRank, spam score and every version's
capture (epoch, score, date, linked to ``/capture/PAGE/EPOCH``, the bytes from the WARC record, or
to pywb with ``--pywb``); a temporal-search form; previous/next pages. ``GET /api?q=…`` returns the
same as JSON. See docs/search.md.
"""

from __future__ import annotations

import argparse
import html
import logging
import re
from pathlib import Path

from raycrawl.argtypes import port
from raycrawl.errors import UserError
from raycrawl.http_guard import Names, add_guard_options, check_bind, guard, tokens_for
from raycrawl.storage.crawl_dir import index_dir as crawl_index_dir

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a search page over DIR/index",
                              description="A small web page for searching a crawl's fragment index (docs/search.md).")
    p.add_argument("dir", type=Path, help="crawl directory holding index/ (or an index directory)")
    add_guard_options(p, "search page")
    p.add_argument("--port", type=port, default=8080, help="port (default 8080; 0 = any free port)")
    p.add_argument("--pywb", metavar="URL", help="link hits to their captures in pywb (BASE/COLLECTION, e.g. "
                   "http://127.0.0.1:8080/mycrawls) instead of serving them from the WARC files here")
    p.set_defaults(func=handle)


def _int(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as e:
        raise UserError(f"{name} must be an integer") from e


PAGE_SIZE = 10
METHODS = ("pagerank", "hits-auth", "hits-hub", "baseline")


def _captures(index, page: int, pywb: str | None) -> list[dict]:
    """The archived captures of a page, one per version: epoch, time and a link that opens the
    capture (``/capture/PAGE/EPOCH``, served from the WARC; or pywb's URL for it)."""
    from datetime import UTC, datetime

    out = []
    for epoch, _dir, _name, _offset, when, _title in (index.captures[page] if page < len(index.captures) else []):
        stamp = datetime.fromtimestamp(when, UTC) if when else None
        link = (f"{pywb.rstrip('/')}/{stamp.strftime('%Y%m%d%H%M%S')}/{index.urls[page]}" if pywb and stamp
                else f"/capture/{page}/{epoch}")
        out.append({"epoch": epoch, "time": stamp.strftime("%Y-%m-%d %H:%M:%S UTC") if stamp else None, "link": link})
    return out


def _title(index, page: int) -> str:
    caps = index.captures[page] if page < len(index.captures) else []
    return caps[-1][5] if caps else ""


def results(index, index_dir: Path, params, pywb: str | None = None) -> dict:
    """The JSON answer for query parameters ``params`` (UserError for bad ones): the hits of page
    ``page`` (1-based) of ``k`` (default 10) each."""
    from raycrawl.commands.search import run_query, run_temporal

    q = params.get("q", "").strip()
    if not q:
        return {"query": "", "results": []}
    version = _int(params.get("version"), "version")
    t1, t2 = _int(params.get("t1"), "t1"), _int(params.get("t2"), "t2")
    k = _int(params.get("k"), "k") or PAGE_SIZE
    page = _int(params.get("page"), "page") or 1
    if k < 1 or page < 1:
        raise UserError("k and page must be positive")
    first = (page - 1) * k
    want = first + k + 1  # one more than shown: is there a next page?
    any_term = params.get("or") in ("1", "on", "true")
    common = {"query": q, "page": page, "k": k, "first": first + 1, "or": any_term, "version": version}
    if (t1 is None) != (t2 is None):
        raise UserError("a temporal search needs both t1 and t2 (the two epochs)")
    if t1 is not None and t2 is not None:
        method = params.get("method", "pagerank")
        if method not in METHODS:
            raise UserError(f"method must be one of {', '.join(METHODS)}")
        (top, edges), qterms = run_temporal(index, index_dir, q, t1, t2, want, method, 0.5)
        return {**common, "terms": qterms, "temporal": [t1, t2], "method": method, "more": len(top) > first + k,
                "edges": [[index.urls[u], index.urls[v]] for u, v in edges],
                "results": [_hit(index, h.page, h.score, qterms, pywb, ir=h.ir, change=h.change, versions=[])
                            for h in top[first: first + k]]}
    hits, qterms, _ = run_query(index, q, want, any_term, version)
    return {**common, "terms": qterms, "more": len(hits) > first + k, "results": [
        _hit(index, h.page, h.score, qterms, pywb, versions=[{"epoch": v.epoch, "score": v.score} for v in h.versions])
        for h in hits[first: first + k]]}


def _hit(index, page: int, score: float, qterms: list[str], pywb: str | None, **extra) -> dict:
    """One result as the page and the API show it (``extra``: what the query kind adds)."""
    return {"url": index.urls[page], "title": _title(index, page), "score": score,
            "snippet": _snip(index, page, qterms), "pagerank": index.pagerank[page], "spam": index.spam[page],
            **extra, "captures": _captures(index, page, pywb)}


def _snip(index, page: int, qterms: list[str], width: int = 240) -> str:
    """About ``width`` characters of the page's stored text around the first query-word match."""
    text = index.snippets[page] if page < len(index.snippets) else ""
    low = text.lower()
    hits = [i for i in (low.find(t) for t in qterms) if i >= 0]
    start = max(0, min(hits) - width // 3) if hits else 0
    cut = text[start: start + width]
    return ("… " if start else "") + cut + (" …" if start + width < len(text) else "")


def _page_link(answer: dict, page: int) -> str:
    from urllib.parse import urlencode

    # the same search, another page: every parameter that shapes the ranking or the page size kept
    params = {"q": answer.get("query", ""), "page": page}
    if answer.get("k", PAGE_SIZE) != PAGE_SIZE:
        params["k"] = answer["k"]
    if answer.get("or"):
        params["or"] = 1
    if answer.get("version") is not None:
        params["version"] = answer["version"]
    if answer.get("temporal"):
        params.update(t1=answer["temporal"][0], t2=answer["temporal"][1], method=answer.get("method", "pagerank"))
    return "/?" + urlencode(params)


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
        scores = {v["epoch"]: v["score"] for v in r.get("versions", [])}
        caps = r.get("captures", [])
        versions = ", ".join(
            f'<a class="capture" href="{esc(c["link"], quote=True)}">epoch {c["epoch"]}'
            + (f" ({scores[c['epoch']]:.2f})" if c["epoch"] in scores else "")
            + f'</a> <span class="date">{esc(c["time"] or "date unknown")}</span>' for c in caps)
        head = (f'<a class="title" href="{esc(caps[-1]["link"], quote=True)}">{esc(r.get("title") or r["url"])}</a>'
                if caps else f'<span class="title">{esc(r.get("title") or r["url"])}</span>')
        rows.append(f'<li class="hit">{head}<div><a class="url" href="{esc(r["url"], quote=True)}">{esc(r["url"])}</a></div>'
                    f'<div class="snippet">{snippet}</div><div class="meta">{esc(" · ".join(meta))}</div>'
                    + (f'<div class="versions">captures: {versions}</div>' if versions else "") + "</li>")
    nav = []
    if answer.get("page", 1) > 1:
        nav.append(f'<a rel="prev" href="{esc(_page_link(answer, answer["page"] - 1), quote=True)}">previous</a>')
    if answer.get("more"):
        nav.append(f'<a rel="next" href="{esc(_page_link(answer, answer.get("page", 1) + 1), quote=True)}">next</a>')
    first = answer.get("first", 1)
    count = (f'<p class="count">results {first}–{first + len(rows) - 1}</p>' if rows else '<p class="count">no results</p>')
    heading = ""
    if answer.get("temporal"):
        t1, t2 = answer["temporal"]
        heading = f'<h2>Temporal search: what changed between epochs {t1} and {t2} ({esc(answer.get("method", ""))})</h2>'
    body = (f'<p class="error">{esc(error)}</p>' if error else
            (f"{heading}{count}<ol start=\"{first}\">{''.join(rows)}</ol>"
             f'<nav class="pages">{" ".join(nav)}</nav>' if q else ""))
    t = answer.get("temporal") or ["", ""]
    options = "".join(f'<option value="{m}"{" selected" if m == answer.get("method") else ""}>{m}</option>'
                      for m in METHODS)
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>raycrawl search</title>"
            "<style>body{font-family:sans-serif;margin:1em 2em}li.hit{margin:.8em 0}a.title{font-size:110%}"
            ".meta,.versions,.date{color:#555;font-size:90%}.error{color:#b00}form{margin:.4em 0}"
            "h1{font-size:130%}h2{font-size:105%}</style></head><body><h1>raycrawl search</h1>"
            f'<form method="get" action="/"><input name="q" value="{esc(q, quote=True)}" size="40">'
            '<input name="version" placeholder="epoch" size="5"><label><input type="checkbox" name="or" value="1">'
            " any word</label> <button>search</button></form>"
            '<details class="temporal"' + (" open" if answer.get("temporal") else "") + "><summary>Temporal search "
            "(pages that changed most between two epochs, ranked on their link neighbourhood)</summary>"
            f'<form method="get" action="/" class="temporal"><input name="q" value="{esc(q, quote=True)}" size="30"> '
            f'<label>from epoch <input name="t1" size="3" value="{esc(str(t[0]), quote=True)}"></label> '
            f'<label>to epoch <input name="t2" size="3" value="{esc(str(t[1]), quote=True)}"></label> '
            f'<label>ranked by <select name="method">{options}</select></label> <button>search</button></form></details>'
            + body + "</body></html>")


def make_app(crawl_dir: Path, pywb: str | None = None, middleware=None):  # noqa: ANN001 - aiohttp's
    """The aiohttp application serving ``crawl_dir``'s index (loaded once); hits link to their
    captures in ``pywb`` (``BASE/COLLECTION``) when given, else to ``/capture/…`` here.
    ``middleware``: who it answers (core/http_guard.py; default: loopback's names, no token)."""
    from aiohttp import web

    from raycrawl.commands.search import open_index

    index = open_index(crawl_dir)
    index_dir = crawl_index_dir(crawl_dir)

    async def page(request: web.Request) -> web.Response:
        try:
            answer, error = results(index, index_dir, request.query, pywb), None
        except UserError as e:
            answer, error, = {"query": request.query.get("q", "")}, str(e)
        return web.Response(text=render_page(answer, error), content_type="text/html", status=400 if error else 200)

    async def api(request: web.Request) -> web.Response:
        try:
            return web.json_response(results(index, index_dir, request.query, pywb))
        except UserError as e:
            return web.json_response({"error": str(e)}, status=400)

    async def capture(request: web.Request) -> web.Response:
        """The archived bytes of one version, as fetched, from its WARC record. The page may not
        load anything (a CSP with no sources): an archive shows what it holds, not the live web."""
        from raycrawl.storage.crawl_dir import layout
        from raycrawl.storage.warc import read_record_at

        try:
            doc, epoch = int(request.match_info["page"]), int(request.match_info["epoch"])
            _, crawl, name, offset, when, _ = next(c for c in index.captures[doc] if c[0] == epoch)
            _, headers, body = read_record_at(layout(crawl).warc, name, offset)
        except (ValueError, IndexError, StopIteration):
            raise web.HTTPNotFound(text="no such capture") from None
        except OSError as exc:
            raise web.HTTPNotFound(text=f"capture not readable: {exc.strerror or exc}") from None
        return web.Response(body=body, headers={
            "Content-Type": headers.get("content-type", "application/octet-stream"),
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
            "X-Archived-From": index.urls[doc], "X-Archive-Epoch": str(epoch)})

    app = web.Application(middlewares=[middleware or guard(Names("127.0.0.1"), None, "reader")])
    app.router.add_get("/", page)
    app.router.add_get("/api", api)
    app.router.add_get("/capture/{page}/{epoch}", capture)
    return app


def handle(args: argparse.Namespace) -> int:
    from aiohttp import web

    tokens = tokens_for(args.host, args.token_file, "serve")
    app = make_app(args.dir, args.pywb, guard(Names(args.host, args.allow_host), tokens, "reader"))
    check_bind(args.host, args.port)
    print(f"serving {args.dir} on http://{args.host}:{args.port}/ (Ctrl-C stops)")
    web.run_app(app, host=args.host, port=args.port, print=None)
    return 0
