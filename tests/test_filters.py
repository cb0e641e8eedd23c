"""Filters: traps, suffixes, depth, length, schemes, content types; composition; settings sources."""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

from raycrawl.exchange import FetchResult
from raycrawl.policies.filters import (
    ContentTypeIn,
    DuplicateSegmentsLessThan,
    HostSuffix,
    MaxDepth,
    Predicate,
    build_postfetch,
    build_prefetch,
    has_repeated_segments,
)
from raycrawl.settings import Settings


def regex_repeats(segments: list[str], times: int) -> bool:
    """Independent check with a back-reference: some run of segments occurs ``times`` times in a row."""
    path = "".join("/" + s for s in segments)
    return re.search(r"((?:/[^/]+)+)" + r"\1" * (times - 1) + r"(?=/|$)", path) is not None


def test_repeated_segments_agree_with_regex():
    rng = random.Random(11)
    for _ in range(3000):
        segs = [rng.choice("abc") for _ in range(rng.randrange(0, 10))]
        for times in (2, 3, 4):
            assert has_repeated_segments(segs, times) == regex_repeats(segs, times), (segs, times)


def test_trap_urls():
    f = build_prefetch(SimpleNamespace(max_duplicate_segments=3))  # 3 repeats in a row is a trap
    assert f("http://t.test/a/b/a/b/")  # twice: fine (could be real)
    assert not f("http://t.test/a/b/a/b/a/b/")
    assert not f("http://t.test/x/a/b/a/b/a/b/y?q=1")
    assert not f("http://t.test/cal/cal/cal")
    assert f("http://t.test/a/a/b/b/c/c/")
    assert f.explain("http://t.test/a/b/a/b/a/b/") == "duplicate-segments"
    # a trap that keeps growing is cut at a bounded depth even before it repeats
    generated = "http://t.test" + "".join(f"/s{i}" for i in range(40))
    assert not f(generated) and f.explain(generated) == "depth"


def test_host_suffix_scheme_length_depth_extensions():
    f = build_prefetch({"host_suffixes": "site.test, other.test", "max_url_length": 60, "max_depth": 3,
                        "exclude_extensions": ["jpg", ".ZIP"]})
    assert f("http://site.test/a") and f("https://www.site.test/a/b/c") and f("http://other.test/")
    assert f.explain("http://notsite.test/") == "host-suffix"  # suffix match is on labels, not characters
    assert f.explain("http://evil.test/site.test") == "host-suffix"
    assert f.explain("ftp://site.test/") == "scheme"
    assert f.explain("http://site.test/" + "x" * 60) == "url-length"
    assert f.explain("http://site.test/a/b/c/d") == "depth"
    assert f.explain("http://site.test/pic.JPG") == "extension" and f.explain("http://site.test/a.zip") == "extension"
    assert f("http://site.test/pic.jpg.html")


def test_defaults_without_settings():
    f = build_prefetch(None)
    assert f("http://any.test/a/b?c=1") and not f("mailto:x@y.test")
    assert not f("http://any.test/" + "a" * 3000)


def test_real_settings_object():
    s = Settings(host_suffixes=["site.test"], max_duplicate_segments=2, allowed_content_types=["text/*"])
    f = build_prefetch(s)
    assert f("http://www.site.test/a/b/") and not f("http://www.site.test/a/a/")
    assert build_prefetch(Settings())("http://www.site.test/a/b/a/b/")
    assert not build_prefetch(Settings())("http://www.site.test/a/b/a/b/a/b/")
    post = build_postfetch(s)
    assert post(FetchResult(url="u", ip="", ctype="text/plain")) and not post(FetchResult(url="u", ip="", ctype="image/png"))


def test_postfetch_content_types():
    post = build_postfetch(None)
    page = FetchResult(url="http://a.test/", ip="127.0.0.1", status=200, ctype="text/html")
    assert post(page)
    page.ctype = "text/plain"
    assert post(page)
    page.ctype = "application/pdf"
    assert not post(page) and post.explain(page) == "content-type"
    page.ctype = ""
    assert not post(page)
    assert build_postfetch({"accept_missing_content_type": True})(page)


def test_composition():
    short = MaxDepth(1)
    site = HostSuffix(["a.test"])
    has_q = Predicate(lambda u: "?" in u, "query")
    both = site & short
    either = site | has_q
    assert both("http://a.test/x") and not both("http://a.test/x/y") and not both("http://b.test/x")
    assert both.explain("http://a.test/x/y") == "depth" and both.explain("http://b.test/x") == "host-suffix"
    assert either("http://b.test/?q") and either("http://a.test/") and not either("http://b.test/")
    assert (~has_q)("http://b.test/") and not (~has_q)("http://b.test/?q")
    assert (site & short & ~has_q).explain("http://a.test/x?q") == "not query"
    assert ContentTypeIn(["text/*"])(SimpleNamespace(ctype="text/csv"))
    assert not DuplicateSegmentsLessThan(2)("http://a.test/x/x")
