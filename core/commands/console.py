"""``raycrawl console``: a crawl's live state and its operator's controls, as a web page and a
REST API (aiohttp), over the crawl's Redis — a process of its own, which any machine that reaches
the Redis can run (docs/operating.md).

Loopback by default. Any other address needs ``--token-file`` (lines ``LABEL TOKEN``, or one
token): every request then carries ``Authorization: Bearer TOKEN`` (the page: ``/?token=TOKEN``
once, kept in a cookie), and a command is logged under the token's label. Either way it answers
only the names it was started for, and a POST only from its own pages: a browser on the operator's
machine must not be turned into a remote control by some other web page (core/http_guard.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import html
import time
from pathlib import Path
from urllib.parse import urlencode

from raycrawl.argtypes import port
from raycrawl.commands.status import add_password_option
from raycrawl.errors import UserError
from raycrawl.http_guard import Names, add_guard_options, check_bind, guard, tokens_for, who_key
from raycrawl.settings import Settings

SAMPLE_EVERY = 2.0
SAMPLES = 1800  # an hour of samples at SAMPLE_EVERY
HOSTS_SHOWN = 50


def register(subparsers) -> None:
    p = subparsers.add_parser("console", help="web page and REST API to watch and steer a crawl",
                              description="A crawl's live state and its operator's controls, as a web page and "
                              "a REST API over the crawl's Redis (docs/operating.md). Loopback by default; any "
                              "other address needs --token-file.")
    p.add_argument("out", type=Path, nargs="?", help="crawl directory (else --redis-url)")
    p.add_argument("--redis-url", help="Redis of the crawl")
    add_password_option(p)
    p.add_argument("--prefix", default=Settings.redis_prefix, help=f"key prefix of the crawl (default {Settings.redis_prefix})")
    add_guard_options(p, "console")
    p.add_argument("--port", type=port, default=8099, help="port (default 8099; 0 = any free port)")
    p.set_defaults(func=handle)


class Console:
    """The console's state: the crawl's Redis, the samples it took, the tokens it accepts."""

    def __init__(self, redis_url: str, prefix: str, out: Path | None, tokens: dict[str, str] | None) -> None:
        self.url, self.prefix, self.out, self.tokens = redis_url, prefix, out, tokens
        self.samples: collections.deque[tuple[float, int, int]] = collections.deque(maxlen=SAMPLES)

    def status(self, hosts: int = HOSTS_SHOWN, query: str = "") -> dict:
        from raycrawl.commands.status import read_status

        st = read_status(self.url, self.prefix, 10**9 if query else hosts)
        if query:
            st["hosts"] = [h for h in st["hosts"] if query.lower() in h["host"]][:hosts]
        errors = sum(v for k, v in st["stats"].items() if k.startswith("error:"))
        now = time.time()
        if not self.samples or now - self.samples[-1][0] >= SAMPLE_EVERY / 2:
            self.samples.append((now, st["stats"].get("pages", 0), errors))
        st["samples"] = list(self.samples)
        st["rate"] = _rate(self.samples)
        st["errors"] = {k[6:]: v for k, v in sorted(st["stats"].items()) if k.startswith("error:")}
        dash = self.out / "dashboard-url" if self.out else None
        st["ray_dashboard"] = dash.read_text().strip() if dash is not None and dash.exists() else None
        if self.out is not None:  # the agents' own samples (storage/crawl_timeline.py), the last hour's
            from raycrawl.storage import crawl_timeline
            from raycrawl.storage.crawl_dir import layout

            st["timeline"] = {"columns": crawl_timeline.COLUMNS,
                              "rows": crawl_timeline.read(layout(self.out).timeline)[-SAMPLES:]}
        return st

    def command(self, verb: str, args: list[str], who: str) -> str:
        """Run one verb (storage/operator_verbs.py); ``show`` answers the state in one line."""
        import redis

        from raycrawl.commands.status import format_operator
        from raycrawl.storage.operator_control import Control
        from raycrawl.storage.operator_verbs import command, verb_named

        client = redis.Redis.from_url(self.url, socket_connect_timeout=5)
        try:
            control = Control(client, self.prefix)
            if verb_named(verb).run is None:
                return "; ".join(line.strip() for line in format_operator(control.state()))
            return command(control, verb, args, who)
        except redis.ConnectionError as exc:
            raise UserError(f"cannot reach the crawl's Redis: {exc}") from None
        finally:
            client.close()


def _rate(samples: collections.deque) -> float | None:
    """Pages/s over the last minute of samples."""
    if len(samples) < 2:
        return None
    last = samples[-1]
    first = next((s for s in samples if last[0] - s[0] <= 60), samples[0])
    return round((last[1] - first[1]) / (last[0] - first[0]), 2) if last[0] > first[0] else None


def make_app(console: Console, names: Names | None = None):
    """``names``: what the console answers to (default: loopback's)."""
    from aiohttp import web

    async def status_api(request):  # noqa: ANN001, ANN202
        st = await _off_loop(console.status, int(request.query.get("hosts", HOSTS_SHOWN)), request.query.get("q", ""))
        return web.json_response(st)

    async def ctl_api(request):  # noqa: ANN001, ANN202
        try:
            body = await request.json()
            verb, args = body["verb"], [str(a) for a in body.get("args", [])]
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": 'expected JSON {"verb": ..., "args": [...]}'}, status=400)
        try:
            done = await _off_loop(console.command, str(verb), args, request[who_key()])
        except UserError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"verb": verb, "done": done, "operator": request[who_key()]})

    async def page(request):  # noqa: ANN001, ANN202
        query = request.query.get("q", "")
        try:
            st = await _off_loop(console.status, HOSTS_SHOWN, query)
        except UserError as exc:
            return web.Response(text=_page_error(str(exc)), content_type="text/html", status=503)
        return web.Response(text=render(st, query, request.query.get("msg", "")), content_type="text/html",
                            headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                     "script-src 'unsafe-inline'; form-action 'self'"})

    async def ctl_form(request):  # noqa: ANN001, ANN202
        form = await request.post()
        verb, args = str(form.get("verb", "")), str(form.get("args", "")).split()
        try:
            msg = f"{verb}: " + await _off_loop(console.command, verb, args, request[who_key()])
        except UserError as exc:
            msg = f"error: {exc}"
        raise web.HTTPSeeOther("/?" + urlencode({"msg": msg}))

    app = web.Application(middlewares=[guard(names or Names("127.0.0.1"), console.tokens, "console")])
    app.router.add_get("/", page)
    app.router.add_post("/ctl", ctl_form)
    app.router.add_get("/api/status", status_api)
    app.router.add_post("/api/ctl", ctl_api)
    return app


async def _off_loop(fn, *args):  # noqa: ANN001, ANN002, ANN202 - Redis calls off the event loop
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _page_error(message: str) -> str:
    return f"<!doctype html><title>raycrawl console</title><h1>raycrawl console</h1><p>{html.escape(message)}</p>"


def _sparkline(samples: list[tuple[float, int, int]], width: int = 600, height: int = 80) -> str:
    """pages/s over the samples as an inline SVG polyline (no script needed)."""
    rates = [(b[0], (b[1] - a[1]) / max(1e-9, b[0] - a[0])) for a, b in zip(samples, samples[1:], strict=False)]
    if len(rates) < 2:
        return "<p>(the rate chart fills in as the console samples the crawl)</p>"
    t0, t1 = rates[0][0], rates[-1][0]
    top = max(r for _, r in rates) or 1.0
    pts = " ".join(f"{(t - t0) / max(1e-9, t1 - t0) * width:.1f},{height - r / top * height:.1f}" for t, r in rates)
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="pages per second">'
            f'<polyline fill="none" stroke="#2a6" stroke-width="1.5" points="{pts}"/></svg>'
            f"<small>pages/s over the last {t1 - t0:.0f} s, peak {top:.1f}</small>")


def render(st: dict, query: str, msg: str) -> str:
    from raycrawl.storage.operator_verbs import VERBS

    esc = html.escape
    op, fr = st["operator"], st["frontier"]
    state = "paused" if op["paused"] else ("stopping" if op["stop"] else "running")
    buttons = "".join(f'<form method="post" action="/ctl"><button name="verb" value="{v.name}" '
                      f'title="{esc(v.summary, quote=True)}">{v.name}</button></form>'
                      for v in VERBS if v.run and not v.usage)
    forms = "".join(f'<form method="post" action="/ctl"><input type="hidden" name="verb" value="{v.name}">'
                    f'<label>{v.name} <input name="args" placeholder="{esc(v.usage, quote=True)}" size="36"></label> '
                    f'<button title="{esc(v.summary, quote=True)}">{v.name}</button></form>'
                    for v in VERBS if v.run and v.usage)
    rules = "".join(f"<tr><td>{esc(k)}</td><td>{esc(str(r['value']))}</td><td>{esc(r['who'])}</td></tr>"
                    for k, r in op["rules"].items()) or '<tr><td colspan="3">none</td></tr>'
    errors = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in st["errors"].items()) or \
        '<tr><td colspan="2">none</td></tr>'
    hosts = "".join(f"<tr><td>{esc(h['host'])}</td><td>{h['done']}</td><td>{h['queued']}</td><td>{h['in_flight']}</td>"
                    f"<td>{esc(_overrides(h['host'], op['rules']))}</td></tr>" for h in st["hosts"])
    dash = f' · <a href="{esc(st["ray_dashboard"], quote=True)}">Ray dashboard</a>' if st.get("ray_dashboard") else ""
    rate = "–" if st.get("rate") is None else f"{st['rate']:.1f}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>raycrawl console</title>
<style>body{{font-family:sans-serif;margin:1em 2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}} form{{display:inline-block;margin:2px 4px}}
.state{{font-size:1.4em;font-weight:bold}} .msg{{background:#ffd;padding:4px}}</style></head>
<body><h1>raycrawl console</h1>
{f'<p class="msg" id="msg">{esc(msg)}</p>' if msg else ''}
<p>crawl: <span class="state" id="state">{state}</span>{dash}</p>
<p id="numbers">pages <b>{st['stats'].get('pages', 0)}</b> · {rate} pages/s · front {fr['front']} · queued {fr['queued']}
 · virtualized {fr['virtualized']} · in flight {fr['inflight']} · hosts {fr['hosts']}</p>
{_sparkline(st['samples'])}
<h2>Controls</h2><div>{buttons}</div><div>{forms}</div>
<h2>Overrides</h2><table><tr><th>rule</th><th>value</th><th>by</th></tr>{rules}</table>
<h2>Errors</h2><table><tr><th>kind</th><th>URLs</th></tr>{errors}</table>
<h2>Hosts</h2><form method="get" action="/"><input name="q" value="{esc(query, quote=True)}" placeholder="host name contains">
<button>search</button></form>
<table><tr><th>host</th><th>done</th><th>queued</th><th>in flight</th><th>overrides</th></tr>{hosts}</table>
<script>setTimeout(function(){{if(!document.querySelector('input:focus'))location.replace('/'+location.search.replace(/[?&]msg=[^&]*/,''))}},5000)</script>
</body></html>"""


def _overrides(host: str, rules: dict) -> str:
    return ", ".join(f"{k.split(' ', 1)[0]}={r['value']}" for k, r in rules.items() if k.endswith(f"host:{host}"))


def handle(args: argparse.Namespace) -> int:
    from aiohttp import web

    from raycrawl.commands.status import crawl_redis, given_password

    if (args.out is None) == (args.redis_url is None):
        raise UserError("console: give a crawl directory or --redis-url (one of them)")
    tokens = tokens_for(args.host, args.token_file, "console")
    check_bind(args.host, args.port)
    with crawl_redis(args.out, args.redis_url, given_password(args)) as (url, _running):
        console = Console(url, args.prefix, args.out, tokens)
        console.status(1)  # a crawl is there (else one line now, not an error page later)
        print(f"console of {args.out or 'the crawl'} on http://{args.host}:{args.port}/ (Ctrl-C stops)")
        web.run_app(make_app(console, Names(args.host, args.allow_host)), host=args.host, port=args.port, print=None)
    return 0
