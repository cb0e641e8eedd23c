"""Which pages the crawl would render (policies/render_policy.py): the markup of the frameworks'
shells, pages that ask for JavaScript or write their content from scripts; not pages whose text is
in their markup, whatever scripts they carry."""

from __future__ import annotations

import pytest

from raycrawl.errors import UserError
from raycrawl.policies.render_policy import RenderPolicy, needs_scripts

ARTICLE = " ".join(["The harbour at dawn is quiet; the boats wait for the tide."] * 8)

NEEDS = {
    # create-react-app's index.html, as served
    "cra": ('<!doctype html><html><head><title>App</title></head><body><noscript>You need to enable JavaScript '
            'to run this app.</noscript><div id="root"></div><script src="/static/js/main.1a2b.js"></script></body></html>',
            "empty-root"),
    "next": ('<html><body><div id="__next"><!-- --></div><script src="/_next/static/chunks/main.js"></script></body></html>',
             "empty-root"),
    "angular": ('<html><body><app-root></app-root><script src="runtime.js" type="module"></script></body></html>',
                "empty-root"),
    "vue": '<html><body><div id="app"></div><script>const { createApp } = Vue; createApp({}).mount("#app")</script></body></html>',
    "asks": ('<html><body><h1>Shop</h1><noscript>This site requires JavaScript. Please turn it on.</noscript>'
             '<script src="/bundle.js"></script></body></html>', "noscript"),
    "writes": ('<html><body><p>Loading…</p><script>fetch("/api/news").then(r => r.json()).then(n => '
               'document.querySelector("p").innerHTML = n.html)</script></body></html>', "script-made"),
    "loader only": ('<html><body><script src="/app.js"></script></body></html>', "script-made"),
}
NEEDS["vue"] = (NEEDS["vue"], "empty-root")

PLAIN = {
    "article with analytics": (f'<html><body><article><h1>Tide</h1><p>{ARTICLE}</p></article><script>(function(){{var s='
                               'document.createElement("script");s.src="https://stats.example/t.js";'
                               'document.head.appendChild(s)}})();</script></body></html>'),
    "tracking pixel noscript": f'<html><body><p>{ARTICLE}</p><noscript><img src="/px.gif"></noscript></body></html>',
    "short page, no scripts": '<html><body><p>Closed on Sunday.</p></body></html>',
    "server-rendered root": (f'<html><body><div id="root"><h1>Tide</h1><p>{ARTICLE}</p></div>'
                             '<script src="/hydrate.js"></script></body></html>'),
    "short page, external script": '<html><body><h1>Contact</h1><p>Call us.</p><script src="/menu.js"></script></body></html>',
}


@pytest.mark.parametrize("name", list(NEEDS))
def test_pages_that_need_scripts(name: str) -> None:
    html, why = NEEDS[name]
    assert needs_scripts(html) == why
    assert needs_scripts(html.encode()) == why


@pytest.mark.parametrize("name", list(PLAIN))
def test_pages_whose_text_is_in_their_markup(name: str) -> None:
    assert needs_scripts(PLAIN[name]) is None


def test_the_render_setting() -> None:
    cra = NEEDS["cra"][0]
    assert RenderPolicy.parse("never").wants("http://a.test/", cra) is None
    assert RenderPolicy.parse("always").wants("http://a.test/", PLAIN["short page, no scripts"]) == "always"
    assert RenderPolicy.parse("auto").wants("http://a.test/", cra) == "empty-root"
    by_url = RenderPolicy.parse(r"^https?://app\.")
    assert by_url.wants("http://app.test/x", "") == "pattern" and by_url.wants("http://www.test/x", cra) is None
    with pytest.raises(UserError, match="neither never, always, auto"):
        RenderPolicy.parse("(")


def test_auto_on_websims_javascript_web() -> None:
    """``auto`` over every HTML page of a websim JavaScript web with every other kind of page too
    (malformed markup, legacy charsets, traps, spam, copies, requisites): it renders exactly the
    pages whose content scripts make — those websim labels ``js:``, and byte-for-byte copies of them."""
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    model = WebModel.generate(hosts=120, ips=12, seed=7, pages_per_host_mean=8, scripts=True, requisites=True)
    web = Renderer(model, 80)
    decided = {True: 0, False: 0}
    for host in model.hosts:
        for page in host.pages.values():
            resp = web.response(host, page)
            if page.kind != "html" or resp.status != 200 or not resp.body:
                continue
            src = model.by_name[page.copy_of[0]].pages[page.copy_of[1]] if "same_bytes" in page.labels else page
            scripted = any(label.startswith("js:") for label in src.labels)
            assert (needs_scripts(resp.body) is not None) == scripted, (host.name, page.path, page.labels)
            decided[scripted] += 1
    assert decided[True] > 100 and decided[False] > 300
