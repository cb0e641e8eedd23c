"""The renderer (actors/visit/renderer.py) in the system's headless Chromium: pages whose content
scripts make, every request answered from the resources given and none from the network, and the
pages that break browsers."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from raycrawl.actors.visit.renderer import Renderer, Resource

SPA = b"""<!doctype html><html><head><title>app</title></head><body><div id="root"></div>
<script>
document.getElementById('root').innerHTML = '<a href="/by-script">made</a><p>Written by a script.</p>';
fetch('/api/items.json').then(r => r.json()).then(items => items.forEach(i => {
  const a = document.createElement('a'); a.href = i; a.textContent = i; document.body.appendChild(a); }));
const img = new Image(); img.src = '/not-archived.png'; document.body.appendChild(img);
</script></body></html>"""

LIST = b"""<!doctype html><html><body><ul id="l"></ul><script>
let n = 0;
function more() { for (let k = 0; k < 5 && n < 30; k++, n++) {
  const li = document.createElement('li'); li.innerHTML = '<a href="/item/' + n + '">item ' + n + '</a>';
  li.style.height = '400px'; document.getElementById('l').appendChild(li); } }
more();
window.addEventListener('scroll', () => { if (innerHeight + scrollY >= document.body.scrollHeight - 10) more(); });
</script></body></html>"""

THROWS = b"""<!doctype html><html><body><p>still here</p><script>
alert('hello'); document.body.insertAdjacentHTML('beforeend', '<a href="/after-alert">a</a>');
null.boom();
</script></body></html>"""

HANGS = b"<!doctype html><html><body><p>never</p><script>while (true) {}</script></body></html>"

EATS = b"""<!doctype html><html><body><script>
const hoard = []; while (true) { hoard.push(new Array(1e6).fill(Math.random())); }
</script></body></html>"""


def page(body: bytes, ctype: str = "text/html") -> Resource:
    return Resource(200, {"content-type": ctype}, body)


WEB = {
    "http://a.test/": page(SPA),
    "http://a.test/api/items.json": page(b'["/from-fetch/1", "http://b.test/from-fetch/2"]', "application/json"),
    "http://a.test/list": page(LIST),
    "http://a.test/throws": page(THROWS),
    "http://a.test/hangs": page(HANGS),
    "http://a.test/eats": page(EATS),
}


def test_script_made_content_and_every_request_from_the_archive() -> None:
    async def go():
        r = Renderer(timeout=15)
        try:
            spa = await r.render("http://a.test/", WEB)
            lst = await r.render("http://a.test/list", WEB)
        finally:
            await r.close()
        return spa, lst

    spa, lst = asyncio.run(go())
    assert spa.error is None, spa
    assert spa.links == ["http://a.test/by-script", "http://a.test/from-fetch/1", "http://b.test/from-fetch/2"]
    assert "Written by a script." in spa.text and 'id="root"><a href="/by-script">' in spa.dom
    # what the page asked for: the page, its fetch() (answered), its image (not archived: aborted, reported)
    assert spa.requested[0] == "http://a.test/" and "http://a.test/api/items.json" in spa.requested
    assert spa.missing == ["http://a.test/not-archived.png"]
    # an infinite list grows as the page is scrolled to its end: every item, however many scrolls it took
    assert lst.error is None and lst.links == [f"http://a.test/item/{i}" for i in range(30)]


def test_pages_that_break_browsers_fail_alone() -> None:
    """A script that throws and an alert are rendered around; a page that never yields and one that
    eats memory fail (timeout, crashed) and the next render works in a fresh browser; browsers are
    recycled after their renders."""
    async def go():
        r = Renderer(timeout=6, js_heap_mb=64, renders_per_browser=2)
        try:
            out = [await r.render(f"http://a.test/{p}", WEB) for p in ("throws", "hangs", "", "eats", "", "", "")]
        finally:
            await r.close()
        return out, r.launches

    (throws, hangs, after_hang, eats, after_eat, *more), launches = asyncio.run(go())
    assert throws.error is None and "still here" in throws.text and throws.links == ["http://a.test/after-alert"]
    assert hangs.error == "timeout" and not hangs.dom and after_hang.error is None and after_hang.links
    assert eats.error in ("crashed", "timeout") and after_eat.error is None and after_eat.links
    assert all(m.error is None and m.links == after_hang.links for m in more)
    assert launches == 4  # the first, after the hang, after the eater, and one recycled after two renders


def test_tabs_render_at_once_each_from_its_own_archive() -> None:
    """Three tabs: renders of the same URL answered from different archives each get their own
    answers, in one browser (a page that hangs beside other tabs: tests/test_render_crawl.py)."""
    def archive(n: int) -> dict[str, Resource]:
        items = page(f'["/only-in-{n}"]'.encode(), "application/json")
        return {**WEB, "http://a.test/api/items.json": items}

    async def go():
        r = Renderer(timeout=6, tabs=3)
        try:
            return await asyncio.gather(*(r.render("http://a.test/", archive(n)) for n in range(4))), r.launches
        finally:
            await r.close()

    spas, launches = asyncio.run(go())
    for n, spa in enumerate(spas):
        assert spa.error is None and "http://a.test/by-script" in spa.links, spa
        assert [u for u in spa.links if "only-in" in u] == [f"http://a.test/only-in-{n}"]
    assert launches == 1


LAZY = b"""<!doctype html><html><body><p>top</p><div style="height:3000px"></div>
<img id="lazy" alt="" data-src="/lazy.png"><img src="/native-passed.png" loading="lazy" alt="">
<div style="height:3000px"></div><img src="/native.png" loading="lazy" alt="">
<img src="/hidden.png" loading="lazy" alt="" style="display:none"><script>
addEventListener('scroll', () => { const i = document.getElementById('lazy'); if (!i.src) i.src = i.dataset.src; });
</script></body></html>"""
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")


# An infinite list (websim's ``js:infinite``: each scroll event appends the next items) on a page slow
# to paint: a fixed backdrop of blurred, shadowed layers. The browser dispatches a scroll event with
# its next frame, and this page's first frame takes ~1.5 s here (20 layers; 10 already take long
# enough), as frames do on a loaded machine: a render that measured the page 350 ms after each
# scroll saw it unchanged twice and stopped with 2 items of 11 (the render crawl lost 7 links of a
# ``js:infinite`` page in a clean clone that way).
BACKDROP = "".join(f'<div style="position:absolute;left:{i * 37 % 100}%;top:{i * 53 % 100}%;width:60%;height:60%;'
                   f'filter:blur(40px) drop-shadow(0 0 80px red);background:radial-gradient(circle,hsl({i * 29},90%,50%),'
                   'transparent)"></div>' for i in range(20))
SLOW_TO_PAINT_LIST = b"""<!doctype html><html><body><div id="root"></div><script>
const root = document.getElementById("root");
root.innerHTML = "<ul>" + [...Array(11).keys()].map(i => '<li><a href="/i/' + i + '">item ' + i + '</a></li>').join("") + "</ul>";
const rest = [...root.querySelectorAll("li")].slice(2).map(li => [li.parentNode, li]);
rest.forEach(([, li]) => li.remove());
addEventListener("scroll", () => { for (let k = 0; k < 2 && rest.length; k++) { const [ul, li] = rest.shift(); ul.appendChild(li); }
  if (rest.length) document.getElementById("more").style.height = (innerHeight + scrollY + 1200) + "px";
  else document.getElementById("more").remove(); });
</script><div id="more" style="height:2400px"></div>
<div style="position:fixed;inset:0;pointer-events:none">""" + BACKDROP.encode() + b"</div></body></html>"


def test_an_infinite_list_grows_to_its_end_when_scroll_events_come_late() -> None:
    async def go():
        r = Renderer(timeout=30)
        try:
            return await r.render("http://a.test/list", {"http://a.test/list": page(SLOW_TO_PAINT_LIST)})
        finally:
            await r.close()

    out = asyncio.run(go())
    assert out.error is None, out
    assert out.links == [f"http://a.test/i/{i}" for i in range(11)], out.links


class LateAnswers(Renderer):
    """A renderer that answers some requests late: ``late`` maps a URL's last segment to seconds."""

    late: ClassVar[dict[str, float]] = {}

    async def _answer(self, route, request) -> None:  # noqa: ANN001
        seconds = self.late.get(request.url.rsplit("/", 1)[-1])
        if seconds:
            await asyncio.sleep(seconds)
        await super()._answer(route, request)


class SlowToHear(LateAnswers):
    """A renderer that hears of the lazy image's request late, as a loaded machine's does (the
    request crosses Chromium, Playwright's driver and this process before it reaches the handler)."""

    late: ClassVar[dict[str, float]] = {"lazy.png": 1.0, "native.png": 1.5}


def test_the_dom_read_names_no_image_the_render_did_not_answer(monkeypatch) -> None:
    """The race a loaded clean clone found: a scroll handler sets an image's src, the render sees the
    network quiet and reads the DOM before the image's request reached it — the DOM names an image
    the render never asked for, and its replay loads one the render did not. Now the DOM is read
    with its images answered, a natively lazy one in view too (the browser asks for it, late here as
    well); one the browser defers and never asks for (the scroll to the end jumped past it, or it is
    not drawn) is not waited for."""
    web = {"http://a.test/lazy": page(LAZY), "http://a.test/lazy.png": page(PNG, "image/png"),
           "http://a.test/native.png": page(PNG, "image/png")}

    from raycrawl.actors.visit import renderer

    monkeypatch.setattr(renderer, "IMAGES_SECONDS", 20.0)  # (an image waited for in vain would take it all)

    async def go():
        r = SlowToHear(timeout=30)
        try:
            return await r.render("http://a.test/lazy", web)
        finally:
            await r.close()

    out = asyncio.run(go())
    assert out.error is None, out
    assert 'src="/lazy.png"' in out.dom and "http://a.test/lazy.png" in out.requested
    assert "http://a.test/native.png" in out.requested  # (in view at the end: the browser asked for it)
    assert not {"http://a.test/native-passed.png", "http://a.test/hidden.png"} & set(out.requested)
    assert out.seconds < 12, out  # (neither waited for: that would take the 20 s)


class SlowToAnswer(LateAnswers):
    """A renderer whose answer for one image, or for a page itself, comes after the render's time is
    up (the page's load event with it): a machine too busy for the render, as far as the page can tell."""

    late: ClassVar[dict[str, float]] = {"slow.png": 4.0, "late": 4.0}


def test_a_render_out_of_time_is_read_as_it_stands_if_the_page_answers() -> None:
    """What a render out of time had made is kept when its page still answers (its scripts ran, its
    links are there); a page whose own response had not come gives nothing (not the blank tab's DOM),
    nor does one that never yields."""
    body = (b'<!doctype html><html><body><div id="root"></div><img src="/slow.png"><script>'
            b"document.getElementById('root').innerHTML = '<a href=\"/by-script\">made</a> by a script';"
            b"</script></body></html>")
    web = {"http://a.test/slow": page(body), "http://a.test/slow.png": page(PNG, "image/png"),
           "http://a.test/late": page(body)}

    async def go():
        r = SlowToAnswer(timeout=1.5)
        try:
            return await r.render("http://a.test/slow", web), await r.render("http://a.test/late", web)
        finally:
            await r.close()

    out, late = asyncio.run(go())
    assert late.error == "timeout" and late.dom == "" and late.links == [], late
    assert out.error == "timeout", out
    assert out.links == ["http://a.test/by-script"] and "by a script" in out.text and 'id="root"><a' in out.dom
