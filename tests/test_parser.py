"""Parser: link forms (RFC 3986 §5.4 reference-resolution examples), robots meta, charsets, junk."""

from __future__ import annotations

import random

import pytest

from raycrawl.actors.visit.parser import Parser, ParseResult
from raycrawl.exchange import FetchResult
from raycrawl.text import content_digest, decode_body, looks_binary, visible_text

BASE = "http://a.test/b/c/d;p?q"
# RFC 3986 §5.4.1/§5.4.2 examples (host "a" → "a.test"); fragments are dropped by canonicalisation.
RFC3986 = {
    "g": "http://a.test/b/c/g", "./g": "http://a.test/b/c/g", "g/": "http://a.test/b/c/g/",
    "/g": "http://a.test/g", "//g.test": "http://g.test/", "?y": "http://a.test/b/c/d;p?y",
    "g?y": "http://a.test/b/c/g?y", "#s": "http://a.test/b/c/d;p?q", "g#s": "http://a.test/b/c/g",
    "g?y#s": "http://a.test/b/c/g?y", ";x": "http://a.test/b/c/;x", "g;x": "http://a.test/b/c/g;x",
    "": "http://a.test/b/c/d;p?q", ".": "http://a.test/b/c/", "./": "http://a.test/b/c/",
    "..": "http://a.test/b/", "../": "http://a.test/b/", "../g": "http://a.test/b/g",
    "../..": "http://a.test/", "../../": "http://a.test/", "../../g": "http://a.test/g",
    "../../../g": "http://a.test/g", "../../../../g": "http://a.test/g", "/./g": "http://a.test/g",
    "/../g": "http://a.test/g", "g.": "http://a.test/b/c/g.", ".g": "http://a.test/b/c/.g",
    "g..": "http://a.test/b/c/g..", "..g": "http://a.test/b/c/..g", "./../g": "http://a.test/b/g",
    "./g/.": "http://a.test/b/c/g/", "g/./h": "http://a.test/b/c/g/h", "g/../h": "http://a.test/b/c/h",
    "g;x=1/./y": "http://a.test/b/c/g;x=1/y", "g;x=1/../y": "http://a.test/b/c/y",
}


def page(body: bytes | str, url: str = BASE, ctype: str = "text/html", status: int = 200, headers=None) -> FetchResult:
    if isinstance(body, str):
        body = body.encode("utf-8")
    hdrs = {"content-type": ctype}
    hdrs.update(headers or {})
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in hdrs.items()]
    return FetchResult(url=url, ip="127.0.0.1", status=status, headers=hdrs, body=body, ctype=ctype.split(";")[0],
                       raw_headers=raw)


def links_of(html: str, url: str = BASE, **kw) -> list[str]:
    return Parser().parse(page(html, url, **kw)).links


def test_rfc3986_reference_resolution():
    for ref, expected in RFC3986.items():
        got = links_of(f'<a href="{ref}">x</a>')
        assert got == [expected], (ref, got)


def test_base_href_applies_to_all_link_forms():
    html = """<html><head><base href="http://other.test/dir/sub/"></head><body>
      <a href="x">1</a><map><area href="../y"></map><iframe src="w?q=1"></iframe></body></html>"""
    assert links_of(html) == ["http://other.test/dir/sub/x", "http://other.test/dir/y", "http://other.test/dir/sub/w?q=1"]
    frameset = """<html><head><base href="http://other.test/f/"></head>
      <frameset><frame src="left.html"><frame src="/right.html"></frameset></html>"""
    assert links_of(frameset) == ["http://other.test/f/left.html", "http://other.test/right.html"]


def test_relative_base_href_resolved_against_page():
    assert links_of('<base href="../base/"><a href="p">p</a>', url="http://a.test/x/y/z.html") == [
        "http://a.test/x/base/p"]


def test_host_case_default_port_escapes_query():
    html = """<a href="HTTP://WwW.Example.TEST:80/A%7eb/%2f?b=2&a=1#top">1</a>
              <a href="https://S.test:443/p">2</a><a href="http://s.test:8080/">3</a>
              <a href="mailto:x@y.test">4</a><a href="javascript:void(0)">5</a><a href="http://[bad">6</a>"""
    assert links_of(html) == ["http://www.example.test/A~b/%2F?b=2&a=1", "https://s.test/p", "http://s.test:8080/"]


def test_entities_and_whitespace_in_attributes():
    html = '<a href=" /x?a=1&amp;b=2 ">1</a><a href="\n/y\t">2</a><a href="/caf&eacute;">3</a><a href="/sp ace">4</a>'
    assert links_of(html) == ["http://a.test/x?a=1&b=2", "http://a.test/y", "http://a.test/caf%C3%A9",
                              "http://a.test/sp%20ace"]


def test_repeats_collapse_in_document_order():
    assert links_of('<a href="/2">a</a><a href="/1">b</a><a href="/2#x">c</a>') == ["http://a.test/2", "http://a.test/1"]


def test_rel_nofollow_and_meta_robots():
    html = '<a href="/f">f</a><a rel="external NoFollow" href="/n">n</a><a rel="next" href="/g">g</a>'
    assert links_of(html) == ["http://a.test/f", "http://a.test/g"]
    r = Parser().parse(page('<meta name="ROBOTS" content="noindex, nofollow"><a href="/f">f</a>'))
    assert r.links == [] and r.nofollow and r.noindex and r.digest is not None
    r = Parser().parse(page('<meta name="robots" content="none"><a href="/f">f</a>'))
    assert r.links == [] and r.noindex
    r = Parser("raycrawl/1.0").parse(page('<meta name="raycrawl" content="nofollow"><a href="/f">f</a>'))
    assert r.links == [] and not r.noindex
    r = Parser().parse(page('<a href="/f">f</a>', headers={"x-robots-tag": "noindex"}))
    assert r.noindex and r.links == ["http://a.test/f"]


@pytest.mark.parametrize(("content", "link"), [
    # the HTML standard's shared declarative refresh steps
    ("0; URL='/next'", "http://a.test/next"),
    ("5;url=/x", "http://a.test/x"),
    ("5, /y", "http://a.test/y"),
    ("5 ; URL = '/z' more", "http://a.test/z"),
    (".5; /w", "http://a.test/w"),
    ("3 url=/v", "http://a.test/v"),
    ("5; ufoo", "http://a.test/b/c/foo"),  # "u" not followed by "rl": skipped, the rest is the URL
    ("600", None), ("0;", None), ("  7  ", None),  # a reload of the page: no link
    ("abc; url=/no", None), ("5x; url=/no", None), ("", None),  # not a refresh at all
])
def test_meta_refresh_per_html_standard(content, link):
    html = f'<meta http-equiv="Refresh" content="{content}"><meta http-equiv="refresh" content="0; url=/second">'
    assert links_of(html) == ([link] if link else [])  # only the first refresh meta counts


def test_x_robots_tag_scoped_to_a_crawler():
    def parse(*lines: str, ua: str = "raycrawl/0.1") -> ParseResult:
        fr = page('<a href="/f">f</a>')
        fr.raw_headers += [(b"X-Robots-Tag", line.encode()) for line in lines]
        return Parser(ua).parse(fr)

    assert parse("otherbot: nofollow").links == ["http://a.test/f"]  # not for us
    assert parse("RayCrawl: nofollow, noindex").links == [] and parse("raycrawl: noindex").noindex
    assert parse("nofollow").nofollow and not parse("unavailable_after: 25 Jun 2030 15:00:00 PST").nofollow
    r = parse("otherbot: noindex", "raycrawl: nofollow")
    assert r.nofollow and not r.noindex
    assert parse("ray: nofollow").links == ["http://a.test/f"]  # a prefix of our token is not our token


def test_query_encoded_in_the_page_encoding():
    """A browser percent-encodes a link's query in the document's encoding (URL Standard), its path in UTF-8."""
    html = '<meta charset="windows-1252"><a href="/caf\u00e9?q=caf\u00e9">x</a><a href="/s?q=\u0416">y</a>'
    r = Parser().parse(page(html.encode("cp1252", errors="xmlcharrefreplace")))
    # (the Cyrillic letter is not in windows-1252: the page holds &#1046;, the browser sends %26%231046%3B)
    assert r.charset == "cp1252"
    assert r.links == ["http://a.test/caf%C3%A9?q=caf%E9", "http://a.test/s?q=%26%231046%3B"]
    r = Parser().parse(page('<meta charset="windows-1251"><a href="/s?q=\u0416">y</a>'.encode("cp1251")))
    assert r.links == ["http://a.test/s?q=%C6"]
    assert Parser().parse(page('<a href="/s?q=\u0416">y</a>')).links == ["http://a.test/s?q=%D0%96"]  # UTF-8 page


def test_rel_canonical_recorded_not_followed():
    html = '<link rel="Canonical alternate" href="../c#x"><link rel=canonical href="/second"><a href="/f">f</a>'
    r = Parser().parse(page(html))
    assert r.canonical == "http://a.test/b/c" and r.links == ["http://a.test/f"]
    assert Parser().parse(page('<link rel=canonical href="mailto:x">')).canonical is None


def test_title_text_and_digest_ignore_markup():
    a = Parser().parse(page("<html><head><title> My   Page </title><script>var x=1</script></head>"
                            "<body><p>Hello <b>world</b></p></body></html>"))
    b = Parser().parse(page("<title>My Page</title><div>hello</div><span>WORLD</span><style>p{}</style>"))
    c = Parser().parse(page("<title>My Page</title><div>hello there world</div>"))
    assert a.title == "My Page"
    assert "var" not in a.text.split() and "Hello" in a.text
    assert a.digest == b.digest == content_digest("my page hello world")
    assert c.digest != a.digest


@pytest.mark.parametrize("declare", ["header", "meta", "http-equiv"])
def test_charsets(declare):
    text = "Caf\u00e9 \u00e0 la cr\u00e8me \u2014 na\u00efve"
    html = f"<html><head>{{meta}}</head><body><p>{text}</p><a href='/caf\u00e9'>x</a></body></html>"
    enc = "cp1252"
    ctype = "text/html"
    if declare == "header":
        ctype, meta = "text/html; charset=windows-1252", ""
    elif declare == "meta":
        meta = '<meta charset="windows-1252">'
    else:
        meta = '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
    body = html.replace("{meta}", meta).encode(enc)
    fr = page(body, ctype=ctype)
    fr.headers["content-type"] = ctype
    r = Parser().parse(fr)
    utf8 = Parser().parse(page(html.replace("{meta}", "").encode("utf-8")))
    assert text in r.text
    assert r.digest == utf8.digest  # same text, whatever the encoding on the wire
    assert r.links == ["http://a.test/caf%C3%A9"] == utf8.links


def test_undeclared_non_utf8_falls_back_to_cp1252():
    text, name = decode_body("\u00e9t\u00e9 \u20ac".encode("cp1252"), None)
    assert (text, name) == ("\u00e9t\u00e9 \u20ac", "cp1252")
    assert decode_body("\u00e9t\u00e9".encode(), "no-such-charset") == ("\u00e9t\u00e9", "utf-8")
    assert decode_body(b"\xef\xbb\xbfabc", "iso-8859-1") == ("abc", "utf-8")  # BOM wins


def test_binary_labelled_html():
    rng = random.Random(3)
    body = bytes(rng.randrange(256) for _ in range(5000))
    assert looks_binary(body)
    r = Parser().parse(page(body))
    assert r.binary and r.links == [] and r.digest is None


def test_garbage_never_raises():
    rng = random.Random(7)
    parser = Parser()
    fragments = ["<a href='", "'>", "<base href=", "</", "<<", ">", "<!--", "<![CDATA[", "\u00e9", "&#0;", "&amp",
                 "<meta name=robots content=", "<iframe src=", "<frame", "\"", "..", "/", "?", "#", "%zz", "%00",
                 "http://", "x.test", "[::1]", ":99999", "\x00", "\ud800".encode("utf-8", "surrogatepass").decode("latin-1")]
    for _ in range(300):
        doc = "".join(rng.choice(fragments) for _ in range(rng.randrange(1, 60)))
        body = doc.encode("utf-8", "surrogatepass") if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(200))
        r = parser.parse(page(body, ctype=rng.choice(["text/html", "application/xhtml+xml", "text/plain"])))
        assert isinstance(r, ParseResult)
        assert all(link.startswith(("http://", "https://")) for link in r.links)


def test_malformed_html_still_yields_links():
    html = "<html><body><div><p><a href=/one>one<a href='two'>two</div></b></i><table><tr><td><a href=\"/three\">"
    assert links_of(html) == ["http://a.test/one", "http://a.test/b/c/two", "http://a.test/three"]


def test_only_2xx_html_or_text_is_parsed():
    html = '<title>t</title><a href="/x">x</a>'
    assert Parser().parse(page(html, status=404)).links == []
    assert Parser().parse(page(html, ctype="image/png")).digest is None
    r = Parser().parse(page("plain words here", ctype="text/plain"))
    assert r.links == [] and r.digest == content_digest("plain words here")
    assert Parser().parse(page("  <!DOCTYPE html><a href='/s'>s</a>", ctype="")).links == ["http://a.test/s"]
    assert Parser().parse(page("just words <a href='/s'>", ctype="")).digest is None
    # the digest of an HTML page is the text pipeline's digest of its visible text
    assert Parser().parse(page(html)).digest == content_digest(visible_text(html))


def test_memoised_resolution_equals_direct_canonicalisation():
    """resolve_link (keyed by the base's directory) must agree with canonicalize(raw, base) everywhere."""
    from raycrawl.actors.visit.parser import _directory, resolve_link
    from raycrawl.urls import canonicalize

    rng = random.Random(13)
    bases = ["http://a.test/b/c/d;p?q", "http://a.test/", "http://a.test/x/y/", "https://S.test:443/p/q.html?z=1#f",
             "http://a.test/%7euser/./idx/../page", "http://a.test:8080/a/b?c", "http://a.test/only"]
    pieces = ["g", ".", "..", "", "/", "?y", "#s", ";x", "g;x", "%7e", "%2F", "h i", "//o.test", "http:g",
              "https://x.test/", "mailto:a", "?", "#", "&", "=", "é", "./", "../", "a/b", "//", "http:", ":", "\t",
              "\n", " ", "HTTP:", "//?", "/\t/", "\\", "@", "[", "]", "\x00", "\u3000", "\x7f", "%", ":80"]
    for _ in range(20000):
        base = rng.choice(bases)
        raw = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 5)))
        canon_base = canonicalize(base) or base
        assert resolve_link(canon_base, _directory(canon_base), raw) == canonicalize(raw, base=base), (base, raw)


@pytest.mark.parametrize("body, charset", [
    ("<title>T</title><p>plain words</p><script>hidden()</script>", None),
    ("<p>before" + "x" * 2000 + "\0after NUL</p>", None),  # a NUL past the binary sniff's sample
    (b"\0\x01\x02binary" * 50, None),
    ('<meta charset="windows-1251"><p>Привет мир</p>'.encode("cp1251"), None),
    ("<p>caf\xe9 au lait</p>".encode("latin-1"), "iso-8859-1"),
    (b"", None),
])
def test_page_text_is_the_parsers_visible_text(body, charset):
    """Summaries use page_text after a crawl and the parser's text during it: they must agree."""
    from raycrawl.text import page_text

    fr = page(body, headers={"content-type": f"text/html; charset={charset}"} if charset else None)
    assert fr.charset == charset
    assert page_text(fr.body, charset) == Parser().parse(fr).text
