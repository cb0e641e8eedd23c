"""Page requisites as a browser finds them (core/requisites.py): HTML attributes, srcset, and CSS
url()/@import read by a CSS Syntax tokenizer (comments, escapes, strings, nested blocks). The
srcset splitting is also held to WPT's cases in tests/test_conformance.py."""

from __future__ import annotations

from raycrawl.requisites import css_urls, html_requisites, srcset_urls
from raycrawl.text import html_tree

PAGE = """<html><head>
<link rel=stylesheet href=a.css><link rel="shortcut icon" href=/f.ico><link rel=next href=n.html>
<link rel="alternate stylesheet" href=alt.css><link rel=modulepreload href=m.js><link rel=preload href=font.woff2>
<style>/* url(comment.png) */ @import 'i.css'; @import url(j.css) screen;
 body { background: url( "b g.png" ) } @font-face { src: url(f.woff2) format('woff2'), url('f.woff') }
 @media print { p { background: URL(print.png) } } .x::after { content: "url(text.png)" }</style>
<script src=s.js></script><script>var u = "url(js.png)";</script></head>
<body style="background-image: url(bs.png)">
<img src=i.png srcset="i1.png 1x, i2.png 2x" style="x: url(is.png)">
<picture><source srcset="p.webp 1x, p2.webp 2x"><img src=p.jpg></picture>
<video src=v.mp4 poster=v.jpg><source src=v.webm><track src=t.vtt></video><audio src=a.mp3></audio>
<object data=o.svg></object><embed src=e.swf><input type=IMAGE src=in.png><input type=text src=no.png>
<a href=x.html><img src=i.png></a><iframe src=frame.html></iframe>
</body></html>"""


def test_html_requisites_in_document_order_without_repeats() -> None:
    assert html_requisites(html_tree(PAGE)) == [
        "a.css", "/f.ico", "alt.css", "m.js", "font.woff2", "i.css", "j.css", "b g.png", "f.woff2", "f.woff",
        "print.png", "s.js", "bs.png", "i.png", "i1.png", "i2.png", "is.png", "p.webp", "p2.webp", "p.jpg",
        "v.mp4", "v.jpg", "v.webm", "t.vtt", "a.mp3", "o.svg", "e.swf", "in.png"]
    # anchors, frames, rel=next, text inside strings and comments, script bodies: not requisites


def test_css_urls() -> None:
    css = ("@charset 'utf-8'; @import \"a.css\" print; @import url('b.css'); @import url(c.css);\n"
           "x { y: url(d\\29 .png); z: url(  'e.png'  ) } /* url(no.png) */ @supports (display:grid) {"
           " q { r: url(f.png) } } s { t: image-set(url(g.png) 1x, 'h.png' 2x) } u { v: url() }")
    assert css_urls(css) == ["a.css", "b.css", "c.css", "d).png", "e.png", "f.png", "g.png", "h.png"]
    assert css_urls("color: red; background: url(x.png) no-repeat", declarations_only=True) == ["x.png"]
    assert css_urls("this is { not } css ; url(") == []  # garbage: nothing, no exception
    assert css_urls("a { b: u\\72l(escaped.png) }") == ["escaped.png"]  # an escape spells the name, as browsers read it
    assert css_urls("width: 10px; color: red", declarations_only=True) == []


def test_srcset_edge_cases() -> None:
    assert srcset_urls("a.png 1x, b,c.png 2x, d.png (foo, bar) 3x, e.png,,,") == ["a.png", "b,c.png", "d.png", "e.png"]
    assert srcset_urls("") == [] and srcset_urls(" , ,") == []


def test_parser_resolves_requisites_as_links_and_reads_stylesheets() -> None:
    """The parser gives a page's requisites resolved as its links are (base element, the page's
    encoding for queries), a stylesheet's url()s and @imports resolved against the stylesheet, and
    none for a nofollow page (its links are not followed either)."""
    from test_parser import page

    from raycrawl.actors.visit.parser import Parser

    html = ('<html><head><base href="http://cdn.test/static/"><link rel=stylesheet href="s.css?v=\u00e9">'
            '</head><body><img src="/logo.png" srcset="a.png 1x, //img.test/b.png 2x"><a href="x.html">x</a>'
            '<img src="javascript:alert(1)"><img src="data:image/png;base64,AAAA"></body></html>')
    pr = Parser().parse(page(html.encode("latin-1"), "http://a.test/dir/p.html", ctype="text/html; charset=latin-1"))
    assert pr.links == ["http://cdn.test/static/x.html"]
    assert pr.embeds == ["http://cdn.test/static/s.css?v=%E9", "http://cdn.test/logo.png",
                         "http://cdn.test/static/a.png", "http://img.test/b.png"]
    css = page("@import 'base.css'; body { background: url(../img/bg.png) } .x { background: url(\"//f.test/f.woff\") }",
               "http://cdn.test/static/css/site.css", ctype="text/css")
    assert pr.sheets == ["http://cdn.test/static/s.css?v=%E9"]  # (what may have requisites of its own)
    sheet = Parser().parse(css)
    assert sheet.embeds == ["http://cdn.test/static/css/base.css", "http://cdn.test/static/img/bg.png",
                            "http://f.test/f.woff"]
    assert sheet.sheets == ["http://cdn.test/static/css/base.css"]
    nofollow = Parser().parse(page('<meta name=robots content=nofollow><img src="a.png">', "http://a.test/"))
    assert nofollow.embeds == [] and nofollow.links == []
