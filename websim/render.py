"""Rendering the model as HTTP responses: HTML in every legal link form, faults, binary bodies.

A page's *content* (title, paragraphs, link blocks with anchor words) is a pure function of the
model; its HTML adds markup variety on top (link forms, ``<base href>``, malformed markup,
charsets, wrapper markup for exact copies) that never changes the visible words. Bodies are
cached after the first render, so the server costs one dict lookup per repeated request.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import random
import struct
import zlib
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from functools import lru_cache
from urllib.parse import unquote, unquote_to_bytes

from raycrawl.websim.model import REAL_PAGES_ROBOTS, SESSION_PARAM, Host, Page, WebModel
from raycrawl.websim.robots import robots_body

SITEMAP_PATH = "/sitemap.xml"

OVERSIZED_BYTES = 12 * 1024 * 1024
BASE_DATE = 1767225600  # 2026-01-01T00:00:00Z: the date of epoch 0
BOMB_BYTES = 128 * 1024 * 1024   # what the gzip bomb inflates to
_EXTRA_WORDS = {
    "iso-8859-1": "café déjà naïve façade crème brûlée",
    "windows-1251": "привет мир текст страница новости",
    "shift_jis": "日本語 テキスト ページ 東京",
}


@dataclass(slots=True)
class Response:
    status: int
    ctype: str | None
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    stream_bytes: int = 0   # > 0: stream this many bytes (chunked, no Content-Length)
    reset: bool = False     # abort the connection instead of answering
    cut: str = ""           # "content_length" | "chunked": send a part of ``body``, then close (CUT_SHARE)
    raw_headers: tuple[tuple[str, bytes], ...] = ()  # header values sent as these exact bytes


@dataclass(slots=True)
class Content:
    title: list[str]
    blocks: list[tuple[str, list]]  # ("p", words) | ("links", [(host, path, anchor words)])
    extra: list[str]                # keyword stuffing / charset words, shown after the blocks


def _h(*key: object) -> int:
    return int.from_bytes(hashlib.blake2b("|".join(map(str, key)).encode(), digest_size=8).digest(), "big")


class Renderer:
    """Turns model pages into responses for a server listening on ``port`` (and, for the hosts in
    ``both``, on ``tls_port`` with https too: see :meth:`link_url`)."""

    def __init__(self, model: WebModel, port: int, tls_port: int = 0, both: frozenset[str] = frozenset()) -> None:
        self.model, self.port = model, port
        self.tls_port, self.both = tls_port, both
        self.vocab = model.vocab
        self._cache: dict[tuple[str, str], Response] = {}
        self._robots_requests: dict[str, int] = {}  # flaky_5xx hosts: robots.txt requests so far
        self._tune_edits()

    # ------------------------------------------------------------------ URLs
    def netloc(self, host: str) -> str:
        return host if self.port == 80 else f"{host}:{self.port}"

    def url(self, host: str, path: str) -> str:
        """The canonical URL of (host, path) — what :func:`raycrawl.urls.canonicalize` yields."""
        return f"http://{self.netloc(host)}{path}"

    def link_url(self, src_host: str, src_path: str, host: str, path: str) -> str:
        """The canonical URL a link from (src_host, src_path) to (host, path) resolves to: for a
        host served on both schemes, https for about half its links (as on a site whose pages and
        links mix http and https), else :meth:`url`. The same on both schemes of the source."""
        if host in self.both and _h(self.model.seed, "scheme", src_host, src_path, path) % 2:
            return self.https_url(host, path)
        return self.url(host, path)

    def https_url(self, host: str, path: str) -> str:
        """The canonical https URL of (host, path) on a host served on both schemes."""
        return f"https://{host}:{self.tls_port}{path}"

    # ------------------------------------------------------------------ content
    def anchor(self, path: str) -> list[str]:
        """Anchor words of a link depend only on the target path, so copies keep their text."""
        bg = self.vocab.background
        h = _h("anchor", path)
        return [bg[h % 300], bg[(h >> 20) % 1500]]

    def _para(self, host: str, path: str, topic: int, i: int, version: int) -> list[str]:
        rng = random.Random(_h(self.model.seed, "para", host, path, i, version))
        return self.vocab.sample(rng, topic, rng.randint(35, 80))

    def content(self, host: Host, page: Page) -> Content:
        """The visible content of an HTML page (before markup)."""
        if page.copy_of:
            src_host = self.model.by_name[page.copy_of[0]]
            base = self.content(src_host, src_host.pages[page.copy_of[1]])
            return Content(base.title, self._with_links(base, page), base.extra)
        if page.edit_of:
            src_host = self.model.by_name[page.edit_of[0]]
            base = self.content(src_host, src_host.pages[page.edit_of[1]])
            return Content(base.title, self._edited(self._with_links(base, page), host.name, page), base.extra)
        rng = random.Random(_h(self.model.seed, "title", host.name, page.path))
        title = self.vocab.sample(rng, page.topic, rng.randint(3, 6), topic_share=0.9)
        paras: list[list[str]] = []
        if page.copied_paras:
            for h, p, i, version in page.copied_paras:
                src = self.model.by_name[h].pages[p]
                paras.append(self._para(h, p, src.topic, i, version))
        else:
            paras = [self._para(host.name, page.path, page.topic, i, v) for i, v in enumerate(page.paras)]
        if host.role == "link_farm":
            paras = [paras[0][:20] + list(rng.sample(self.vocab.popular_terms, 10))] if paras else []
        blocks: list[tuple[str, list]] = []
        links = page.links
        per = -(-len(links) // max(1, len(paras))) if links else 0
        for i, words in enumerate(paras or [[]]):
            if words:
                blocks.append(("p", words))
            chunk = links[i * per:(i + 1) * per] if per else []
            if chunk:
                blocks.append(("links", [(h, p, self.anchor(p)) for h, p in chunk]))
        extra: list[str] = []
        if host.role == "keyword_stuffing":
            pop = self.vocab.popular_terms
            title = [pop[(_h(page.path, j) % 40)] for j in range(8)]
            extra = [pop[_h(host.name, page.path, j) % len(pop)] for j in range(rng.randint(150, 300))]
        if page.charset != "utf-8":
            extra = _EXTRA_WORDS[page.charset].split()
        return Content(title, blocks, extra)

    def _with_links(self, base: Content, page: Page) -> list[tuple[str, list]]:
        """The source's blocks with the link targets replaced by ``page``'s (same anchors)."""
        out, k = [], 0
        for kind, items in base.blocks:
            if kind == "links":
                items = [(h, p, a) for (h, p), (_, _, a) in zip(page.links[k:k + len(items)], items, strict=False)]
                k += len(items)
            out.append((kind, items))
        if page.links[k:]:
            out.append(("links", [(h, p, self.anchor(p)) for h, p in page.links[k:]]))
        return out

    def _edit_order(self, blocks: list[tuple[str, list]], host: str, page: Page) -> list[tuple[int, int]]:
        slots = [(b, j) for b, (kind, items) in enumerate(blocks) if kind == "p" for j in range(len(items))]
        random.Random(_h(self.model.seed, "edit", host, page.path)).shuffle(slots)
        return slots

    def _edited(self, blocks: list[tuple[str, list]], host: str, page: Page,
                order: list[tuple[int, int]] | None = None) -> list[tuple[str, list]]:
        """``blocks`` with ``page.edit_words`` paragraph words replaced (the first ones of a fixed
        random order, so more edits always include fewer edits)."""
        if order is None:
            order = self._edit_order(blocks, host, page)
        out = [(kind, list(items) if kind == "p" else items) for kind, items in blocks]
        bg = self.vocab.background
        for b, j in order[: page.edit_words]:
            out[b][1][j] = bg[2000 + _h(host, page.path, b, j) % 2000]
        return out

    def words(self, host: Host, page: Page) -> list[str]:
        """The visible words in document order (what ``raycrawl.text.tokens(visible_text(html))`` sees)."""
        return _content_words(self.content(host, page))

    def _tune_edits(self) -> None:
        """Pick each near-duplicate's number of replaced words so its 4-shingle Jaccard with the
        original lands near its target (measured, not estimated: short pages are granular)."""
        for host in self.model.hosts:
            for page in host.pages.values():
                if not page.edit_of:
                    continue
                src_host = self.model.by_name[page.edit_of[0]]
                src = src_host.pages[page.edit_of[1]]
                orig = shingles(self.words(src_host, src))
                base = self.content(src_host, src)
                blocks = self._with_links(base, page)
                order = self._edit_order(blocks, host.name, page)
                n_words = len(order)
                best, best_err = 1, 9.0
                lo, hi = 1, max(1, n_words)
                while lo <= hi:  # Jaccard falls as edits grow: bisect on the number of edits
                    mid = (lo + hi) // 2
                    page.edit_words = mid
                    edited = Content(base.title, self._edited(blocks, host.name, page, order), base.extra)
                    j = jaccard(orig, shingles(_content_words(edited)))
                    if abs(j - page.target_jaccard) < best_err:
                        best, best_err = mid, abs(j - page.target_jaccard)
                    if j > page.target_jaccard:
                        lo = mid + 1
                    else:
                        hi = mid - 1
                page.edit_words = best

    # ------------------------------------------------------------------ HTML
    def _href(self, rng: random.Random, src_host: Host, page: Page, base_dir: str, target: tuple[str, str],
              sid: str) -> str:
        host, path = target
        if self.both and (host in self.both or src_host.name in self.both):
            # Absolute, scheme and all: a page served on both schemes has the same links on both
            # (a relative or scheme-relative one would follow the scheme it was fetched with).
            return self.link_url(src_host.name, page.path, host, path)
        if host == src_host.name and src_host.role == "session":
            # A fresh session id per visit: the id on each link depends on the id of the request.
            path = f"{path}{'&' if '?' in path else '?'}{SESSION_PARAM}={_h('sid', sid, page.path, path) % 16**8:08x}"
        r = rng.random()
        form = _h(self.model.seed, "browser-form", src_host.name, page.path, path) % 16
        if host != src_host.name:
            if form == 0:  # WHATWG: an http(s) URL ignores the extra slashes before the host
                return f"///{self.netloc(host)}{path}"
            if form == 1:
                return f"http:\\\\{self.netloc(host)}{path}"  # http:\\host/path
            if r < 0.15:
                return f"//{self.netloc(host)}{path}"
            if r < 0.3:
                return f"http://{_mixed_case(rng, host)}:{self.port}{path}"
            return f"http://{self.netloc(host)}{path}"
        if form == 0:  # a backslash is a slash in an http(s) path (not in its query)
            p, q, rest = path.partition("?")
            return p.replace("/", "\\") + q + rest
        if r < 0.35:
            return _relative(base_dir, path)
        if r < 0.5:
            return path
        if r < 0.58:
            return _relative(base_dir, path) + f"#sec{rng.randrange(5)}"
        if r < 0.66:
            rel = _relative(base_dir, path)
            return rel if rel.startswith(("./", "../")) else "./" + rel
        if r < 0.74:
            return f"http://{_mixed_case(rng, host)}:{self.port}{path}"
        if r < 0.82:
            return f"//{self.netloc(host)}{path}#top"
        if r < 0.9:
            return _escape_one(rng, path)
        return f"http://{self.netloc(host)}{path}"

    def html(self, host: Host, page: Page, sid: str = "") -> str:
        c = self.content(host, page)
        rng = random.Random(_h(self.model.seed, "forms", host.name, page.path))
        malformed = "malformed" in page.labels
        variant = 1 + _h(host.name, page.path) % 3 if page.copy_of else 0
        base_dir = page.path.split("?")[0].rsplit("/", 1)[0] + "/"
        head = []
        if page.charset != "utf-8":
            head.append(f'<meta charset="{page.charset}">')
        else:
            head.append('<meta charset="utf-8">')
        head.append(f"<title>{' '.join(c.title)}</title>")
        if "base_href" in page.labels:
            base_dir = f"/{self.vocab.topic_words[page.topic][3]}/based/"
            head.append(f'<base href="http://{self.netloc(host.name)}{base_dir}">')
        if host.role == "keyword_stuffing":
            head.append(f'<meta name="keywords" content="{", ".join(c.title)}">')
        marks = _h(self.model.seed, "marks", host.name, page.path)
        if marks % 11 == 0:  # a refresh without a URL reloads the page: no link (HTML standard)
            head.append('<meta http-equiv="refresh" content="600">')
        canonical = self.canonical(host, page)
        if canonical is not None:
            head.append(f'<link rel="canonical" href="{html.escape(canonical, quote=True)}">')
        images = []
        for h, p in page.embeds:  # page requisites (a requisites web: WebModel._add_requisites)
            u = html.escape(self.url(h, p), quote=True)
            if p.endswith(".css"):
                head.append(f'<link rel="stylesheet" href="{u}">')
            elif p.endswith(".js"):
                head.append(f'<script src="{u}"></script>')
            elif p.endswith("@2x.png"):
                images[-1] = images[-1][:-1] + f' srcset="{u} 2x">'
            else:
                images.append(f'<img alt="" src="{u}">')
        parts = ["<!DOCTYPE html>", '<html lang="en"><head>', *head, "</head><body>", *images[:1]]
        if variant:
            parts.append("<!-- exact copy -->" + "<div class=\"wrap\">" * variant)
        parts.append(f"<h1>{' '.join(c.title)}</h1>")
        for kind, items in c.blocks:
            if kind == "p":
                parts.append(f"<p>{' '.join(items)}" + ("" if malformed else "</p>"))
            else:
                lis = []
                for h, p, a in items:
                    href = self._href(rng, host, page, base_dir, (h, p), sid)
                    if p.startswith("/find?q=") and h == host.name:  # written as text, in the page's encoding
                        href = unquote(href, encoding=page.charset)
                    href = html.escape(href, quote=True)
                    if malformed and rng.random() < 0.3 and '"' not in href and " " not in href:
                        lis.append(f"<li><a href={href}><b><i>{' '.join(a)}</b></i></a>")
                    else:
                        lis.append(f'<li><a href="{href}">{" ".join(a)}</a></li>')
                parts.append("<ul>" + "".join(lis) + "</ul>")
        parts.extend(images[1:])
        if c.extra:
            hidden = ' style="display:none"' if host.role == "keyword_stuffing" else ""
            parts.append(f"<div{hidden}>{' '.join(c.extra)}</div>")
        if not malformed:
            parts.append('<p class="foot"><a href="mailto:webmaster@example.test"></a>'
                         '<a href="javascript:void(0)"></a></p>')
        if variant:
            parts.append("</div>" * variant)
        if malformed:
            parts.append("</div></span><table><tr><td>")
        else:
            parts.append("</body></html>")
        return "\n".join(parts) if variant != 2 else "".join(parts)

    def scripted(self, host: Host, page: Page, kind: str) -> str:
        """A page of a JavaScript web (WebModel._add_scripts) as served: its head as :meth:`html`
        writes it, and a body that is an empty application root which scripts fill with what
        :meth:`html` would have put there (so the rendered DOM's text and links are the page's)."""
        if kind in ("hangs", "eats"):
            loop = "for (;;) {}" if kind == "hangs" else "const hoard = []; for (;;) hoard.push(new Array(1e6).fill(Math.random()));"
            return f'<!DOCTYPE html><html><head><title>{kind}</title></head><body><div id="root"></div><script>{loop}</script></body></html>'
        if kind == "route":  # the application's shell, byte for byte the same on every route of the host
            app = next(p for p, pg in host.pages.items() if "routes" in pg.labels)
            return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>app</title></head><body>'
                    f'<div id="root"></div><script src="{app}"></script></body></html>')
        head, _, rest = self.html(host, page).partition("<body>")
        content = json.dumps(rest.rsplit("</body>", 1)[0]).replace("</", "<\\/")
        fill = f'const root = document.getElementById("root"); root.innerHTML = {content};'
        after = ""
        match kind:
            case "fetch":
                api = next(p for p in host.pages.values() if f"content_of:{page.path}" in p.labels)
                fill = (f'fetch("{api.path}").then(r => r.json()).then(d => {{ '
                        'document.getElementById("root").innerHTML = d.html; });')
            case "lazy":
                img = next(p for p in host.pages if p.startswith("/static/lazy") and host.pages[p].parent == page.path)
                after = (f'<div style="height:2400px"></div><img id="lazy" alt="" data-src="{img}">'
                         '<script>addEventListener("scroll", () => { const i = document.getElementById("lazy"); '
                         'if (!i.getAttribute("src") && scrollY > 0) i.src = i.dataset.src; });</script>')
            case "infinite":
                fill += ('const rest = [...root.querySelectorAll("li")].slice(2).map(li => [li.parentNode, li]);'
                         'rest.forEach(([, li]) => li.remove()); const step = Math.max(2, Math.ceil(rest.length / 8));'
                         'addEventListener("scroll", () => { for (let k = 0; k < step && rest.length; k++) {'
                         ' const [ul, li] = rest.shift(); ul.appendChild(li); }'
                         ' if (rest.length) document.getElementById("more").style.height = (innerHeight + scrollY + 1200) + "px";'
                         ' else document.getElementById("more").remove(); });')
                after = '<div id="more" style="height:2400px"></div>'
            case "pushstate":
                fill = f'history.pushState({{}}, "", location.pathname + "?view=app"); {fill}'
            case "throws":
                fill += " null.boom();"
            case "alerts":
                fill = f'alert("welcome"); confirm("accept cookies?"); {fill}'
        return f'{head}<body><div id="root"></div><script>{fill}</script>{after}</body></html>'

    def application(self, host: Host) -> str:
        """The script of a host's client-side routes (``js:route`` pages): each route's title and
        content, written for the path (and query) it is at."""
        routes = {}
        for path, page in host.pages.items():
            if "js:route" in page.labels:
                html_text = self.html(host, page)
                title = html_text.split("<title>", 1)[1].split("</title>", 1)[0]
                routes[path] = [title, html_text.partition("<body>")[2].rsplit("</body>", 1)[0]]
        table = json.dumps(routes).replace("</", "<\\/")
        return (f"const routes = {table};\nconst r = routes[location.pathname + location.search];\n"
                'if (r) { document.title = r[0]; document.getElementById("root").innerHTML = r[1]; }\n')

    def stylesheet(self, page: Page) -> str:
        """A stylesheet's text: an ``@import`` of each stylesheet it names, a background image, a
        font face its text uses (so a browser fetches each)."""
        rules = [f'@import url("{self.url(h, p)}");' for h, p in page.embeds if p.endswith(".css")]
        for h, p in page.embeds:
            if p.endswith(".png"):
                rules.append(f'body {{ background: #fff url("{self.url(h, p)}") no-repeat; }}')
            elif p.endswith(".woff"):
                rules.append(f'@font-face {{ font-family: "shared"; src: url("{self.url(h, p)}") format("woff"); }}\n'
                             'body, h1, p { font-family: "shared", sans-serif; }')
        return "\n".join(rules) + "\n"

    def canonical(self, host: Host, page: Page) -> str | None:
        """The ``<link rel=canonical>`` URL of an HTML page, if it has one: a print view names its
        source; one page in seven names itself; a byte-identical copy says what its source says."""
        if "same_bytes" in page.labels and page.copy_of:
            src_host = self.model.by_name[page.copy_of[0]]
            return self.canonical(src_host, src_host.pages[page.copy_of[1]])
        if "print_view" in page.labels and page.copy_of:
            return self.url(*page.copy_of)
        if _h(self.model.seed, "canonical", host.name, page.path) % 7 == 0:
            return self.url(host.name, page.path)
        return None

    def x_robots_tag(self, host: Host, page: Page) -> str | None:
        """An ``X-Robots-Tag`` for another crawler (``otherbot: nofollow``): not for raycrawl."""
        return "otherbot: nofollow" if _h(self.model.seed, "xrobots", host.name, page.path) % 9 == 0 else None

    # ------------------------------------------------------------------ responses
    def response(self, host: Host, page: Page, sid: str = "") -> Response:
        """The response for ``page``; ``sid`` is the session id of the request (session-id hosts)."""
        if sid:
            return self._render(host, page, sid)  # unbounded key space: not cached
        key = (host.name, page.path)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._render(host, page)
        return cached

    def _render(self, host: Host, page: Page, sid: str = "") -> Response:
        if page.removed_in is not None:
            return not_found()
        if "same_bytes" in page.labels and page.copy_of:  # byte for byte the source's answer
            src_host = self.model.by_name[page.copy_of[0]]
            return self.response(src_host, src_host.pages[page.copy_of[1]], sid)
        match page.kind:
            case "html":
                script = next((lab[3:] for lab in page.labels if lab.startswith("js:")), None)
                text = self.html(host, page, sid) if script is None else self.scripted(host, page, script)
                if page.charset == "utf-8":
                    ctype, body = "text/html; charset=utf-8", text.encode()
                else:
                    ctype = "text/html" if "charset_in_meta_only" in page.labels else f"text/html; charset={page.charset}"
                    body = text.encode(page.charset)
                # Validators for conditional GETs: the page's last change (epoch K = BASE_DATE + K
                # days) and a digest of its bytes.
                modified = last_modified(max(page.changed, default=0))
                etag = f'"{hashlib.blake2b(body, digest_size=8).hexdigest()}"'
                headers = (("Last-Modified", modified), ("ETag", etag))
                xrt = self.x_robots_tag(host, page)
                return Response(200, ctype, body, headers + ((("X-Robots-Tag", xrt),) if xrt else ()))
            case "redirect":
                assert page.location is not None
                loc = self.url(*page.location)
                if "location_latin1" in page.labels:  # the Location as Latin-1 bytes, not percent-encoded
                    raw = unquote_to_bytes(loc)
                    return Response(page.status, "text/html", b"moved", raw_headers=(("Location", raw),))
                return Response(page.status, "text/html", f'<a href="{loc}">moved</a>'.encode(), (("Location", loc),))
            case "error":
                headers = (("Retry-After", "120"),) if page.status == 503 else ()
                return Response(page.status, "text/html", b"<html><body>server error</body></html>", headers)
            case "reset":
                return Response(0, None, reset=True)
            case "cut":
                body = self.html(host, page, sid).encode("utf-8")
                return Response(200, "text/html", body, cut=page.labels[0])
            case "oversized":
                if "chunked" in page.labels:
                    return Response(200, "text/html", stream_bytes=OVERSIZED_BYTES)
                return Response(200, "text/html", oversized_body())
            case "bomb":
                return Response(200, "text/html", gzip_bomb(), (("Content-Encoding", "gzip"),))
            case "binary":
                rnd = random.Random(_h(self.model.seed, "binary", host.name, page.path))
                return Response(200, "text/html", rnd.randbytes(4096))
            case "real":  # a real site's page, its bytes as saved (WebModel._add_real_pages)
                assert self.model.real_dir is not None
                name = page.labels[0][len("real:"):]
                return Response(200, "text/html", gzip.decompress((self.model.real_dir / f"{name}.html.gz").read_bytes()))
            case "pdf":
                return Response(200, "application/pdf", tiny_pdf())
            case "png":
                return Response(200, "image/png", tiny_png())
            case "css":
                return Response(200, "text/css", self.stylesheet(page).encode())
            case "js":
                if "routes" in page.labels:
                    return Response(200, "text/javascript", self.application(host).encode())
                # (a script that ran says so in the DOM: a renderer that lacked it shows it lacked it)
                mark = f"{host.name}{page.path}"
                return Response(200, "text/javascript", (
                    f"/* {mark} */ window.loaded = true;\n"
                    "document.documentElement.setAttribute('data-loaded', "
                    f"((document.documentElement.getAttribute('data-loaded') || '') + ' {mark}').trim());\n").encode())
            case "font":
                return Response(200, "font/woff", b"wOFF" + hashlib.sha1(page.path.encode()).digest())
            case "json":  # a script-made page's content (WebModel._add_scripts)
                src = host.pages[next(lab for lab in page.labels if lab.startswith("content_of:"))[11:]]
                body = self.html(host, src).partition("<body>")[2].rsplit("</body>", 1)[0]
                return Response(200, "application/json", json.dumps({"html": body}).encode())
        raise AssertionError(f"unknown page kind {page.kind}")

    def robots(self, host: Host) -> Response:
        """``/robots.txt`` (and ``/robots-moved.txt`` for the redirected kind)."""
        match host.robots:
            case "missing":
                return not_found()
            case "error_5xx":
                return Response(503, "text/html", b"<html><body>unavailable</body></html>")
            case "redirect":
                loc = self.url(host.name, "/robots-moved.txt")
                return Response(301, "text/html", b"moved", (("Location", loc),))
            case "garbage":
                return Response(200, "text/html", (robots_body("garbage", None) or "").encode())
            case "redirect_cross":
                assert host.robots_partner is not None
                loc = self.url(host.robots_partner, f"/robots-for/{host.name}.txt")
                return Response(301, "text/html", b"moved", (("Location", loc),))
            case "flaky_5xx":
                n = self._robots_requests[host.name] = self._robots_requests.get(host.name, 0) + 1
                if n == 1:
                    return Response(503, "text/html", b"<html><body>busy, try again</body></html>")
        if host.robots == REAL_PAGES_ROBOTS:
            body = "User-agent: *\n" + "".join(f"{'Allow' if allow else 'Disallow'}: {pattern}\n"
                                               for allow, pattern in host.rules.rules)
            return Response(200, "text/plain", body.encode())
        body = robots_body(host.robots, host.crawl_delay)
        assert body is not None
        prefix = b"\xef\xbb" if host.robots == "bom_truncated" else b""
        return Response(200, "text/plain", prefix + body.encode())

    def partner_robots(self, host: Host, asker: str) -> Response | None:
        """``/robots-for/ASKER.txt`` on the host that serves a redirect_cross host's robots.txt."""
        other = self.model.by_name.get(asker)
        if other is None or other.robots_partner != host.name:
            return None
        return Response(200, "text/plain", (robots_body(other.robots, other.crawl_delay) or "").encode())

    def sitemap(self, host: Host) -> Response:
        """``/sitemap.xml`` (sitemaps.org): every live HTML page of the host, in path order. Served
        for every host and listed in no robots.txt, so only a crawl given it (as a seed) reads it."""
        locs = "".join(f"<url><loc>{html.escape(self.url(host.name, p.path))}</loc></url>\n"
                       for p in sorted(host.pages.values(), key=lambda p: p.path)
                       if p.kind == "html" and p.status == 200 and p.removed_in is None)
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                f"{locs}</urlset>\n")
        return Response(200, "application/xml", body.encode())

    def moved_robots(self, host: Host) -> Response | None:
        if host.robots != "redirect":
            return None
        return Response(200, "text/plain", (robots_body("redirect", host.crawl_delay) or "").encode())

    # ------------------------------------------------------------------ traps
    def calendar(self, host: Host, year: int, month: int) -> Response:
        prev_y, prev_m = (year, month - 1) if month > 1 else (year - 1, 12)
        next_y, next_m = (year, month + 1) if month < 12 else (year + 1, 1)
        words = self._para(host.name, f"cal{month}", host.topic, 0, 0)[:30]
        body = (f"<html><head><title>Calendar {year} {month:02d}</title></head><body><h1>{year}-{month:02d}</h1>"
                f"<p>{' '.join(words)}</p><a href=\"/calendar/{prev_y}/{prev_m:02d}/\">previous</a> "
                f"<a href=\"../../{next_y}/{next_m:02d}/\">next</a> <a href=\"/\">home</a></body></html>")
        return Response(200, "text/html; charset=utf-8", body.encode())

    def repeat(self, host: Host, path: str, seg: str) -> Response:
        body = (f"<html><head><title>{seg}</title></head><body><p>{' '.join(self.anchor(path))}</p>"
                f"<a href=\"{seg}\">more</a> <a href=\"/\">home</a></body></html>")
        return Response(200, "text/html; charset=utf-8", body.encode())


def _content_words(c: Content) -> list[str]:
    out = list(c.title) * 2  # <title> and <h1>
    for kind, items in c.blocks:
        if kind == "p":
            out.extend(items)
        else:
            for _, _, a in items:
                out.extend(a)
    out.extend(c.extra)
    return out


def not_modified(resp: Response, if_none_match: str | None, if_modified_since: str | None) -> bool:
    """RFC 9110 §13.1: If-None-Match wins when present; else If-Modified-Since against Last-Modified."""
    if resp.status != 200:
        return False
    headers = dict(resp.headers)
    if if_none_match is not None:
        etag = headers.get("ETag")
        return etag is not None and (if_none_match.strip() == "*" or etag in [t.strip() for t in if_none_match.split(",")])
    if if_modified_since and "Last-Modified" in headers:
        try:
            return parsedate_to_datetime(headers["Last-Modified"]) <= parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False  # an unparsable date is ignored, as RFC 9110 says
    return False


def last_modified(epoch: int) -> str:
    """HTTP date of epoch ``epoch``: 2026-01-01 00:00 GMT plus one day per epoch."""
    return formatdate(BASE_DATE + 86400 * epoch, usegmt=True)


def not_found() -> Response:
    return Response(404, "text/html", b"<html><body>not found</body></html>")


def shingles(words: list[str], k: int = 4) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + k]) for i in range(max(1, len(words) - k + 1))}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _mixed_case(rng: random.Random, host: str) -> str:
    return "".join(ch.upper() if rng.random() < 0.5 else ch for ch in host)


def _escape_one(rng: random.Random, path: str) -> str:
    """Percent-encode one unreserved letter: the same URL after canonicalisation."""
    idx = [i for i, ch in enumerate(path) if ch.isalpha() and "?" not in path[:i]]
    if not idx:
        return path
    i = rng.choice(idx)
    return f"{path[:i]}%{ord(path[i]):02X}{path[i + 1:]}"


def _relative(base_dir: str, target: str) -> str:
    """A relative reference from a document in ``base_dir`` (ends with /) to the path ``target``."""
    tpath, sep, query = target.partition("?")
    tdir, _, name = tpath.rpartition("/")
    bseg = [s for s in base_dir.split("/") if s]
    tseg = [s for s in tdir.split("/") if s]
    common = 0
    while common < min(len(bseg), len(tseg)) and bseg[common] == tseg[common]:
        common += 1
    rel = "../" * (len(bseg) - common) + "".join(s + "/" for s in tseg[common:]) + name + sep + query
    if not rel or rel.startswith("?"):
        rel = "./" + rel
    return rel


@lru_cache(maxsize=1)
def oversized_body() -> bytes:
    para = b"<p>" + b"filler text " * 80 + b"</p>\n"
    return b"<html><body>" + para * (OVERSIZED_BYTES // len(para)) + b"</body></html>"


@lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """A gzip member inflating to BOMB_BYTES, built in ~0.1 s: after a full flush a deflate
    stream is byte-aligned with an empty window, so the compressed form of one 1 MiB block of
    zeros can simply be repeated."""
    chunk = b"\0" * (1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = comp.compress(b"<html><body>") + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    assert comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH) == block
    tail = comp.flush(zlib.Z_FINISH)
    n = BOMB_BYTES >> 20
    crc = zlib.crc32(b"<html><body>")
    for _ in range(n):
        crc = zlib.crc32(chunk, crc)
    size = (12 + n * len(chunk)) & 0xFFFFFFFF
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + head + block * n + tail + struct.pack("<II", crc, size)


@lru_cache(maxsize=1)
def tiny_pdf() -> bytes:
    return (b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
            b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")


@lru_cache(maxsize=1)
def tiny_png() -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    raw = b"".join(b"\0" + bytes(range(0, 256, 32)) for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
