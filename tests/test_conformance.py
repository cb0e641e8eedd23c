"""Public conformance suites nobody here wrote (tests/conformance/SOURCE.md): Google's robots.txt
cases through ``raycrawl robots check --batch``, the WHATWG URL tests through ``raycrawl url --batch``,
w3lib's ``canonicalize_url`` cases through ``canonicalize``. Each deliberate difference is listed
with its reason; everything else must match."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from protego import Protego

sys.path.insert(0, str(Path(__file__).with_name("conformance")))
from robotstxt_spec import cases as robots_cases  # noqa: E402

CONF = Path(__file__).with_name("conformance")


def batch(command: list[str], requests: list[dict]) -> list[dict]:
    """Run ``raycrawl COMMAND --batch`` once over all requests (JSON lines in, JSON lines out)."""
    proc = subprocess.run([sys.executable, "-m", "raycrawl", *command, "--batch"], capture_output=True, text=True,
                          input="".join(json.dumps(r) + "\n" for r in requests), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == len(requests)
    return out


# --- Google's robotstxt-spec-test ---------------------------------------------------------------
# (file, test index, user agent, url) → why raycrawl's verdict differs from the expectation.
RFC_DIFFERENCES = {
    **{(f, i, ua, u): "RFC 9309 §2.2.2: the /robots.txt URI is implicitly allowed"
       for f, i, ua, u in [("stress/327748.textproto", 0, "asdfbot", "http://m.example.com/robots.txt"),
                           ("stress/369883.textproto", 0, "BarBot", "http://example.com/robots.txt"),
                           ("stress/369883.textproto", 0, "AB", "http://example.com/robots.txt"),
                           ("stress/860237.textproto", 0, "XYZ", "http://example.com/robots.txt")]},
    ("correctness/non-ascii-paths.textproto", 1, "FooBot", "http://foo.bar/foo/bar/ツ"):
        "the crawler checks (and requests) canonical URLs: the non-ASCII path is percent-encoded "
        "first, as RFC 9309 §2.2.2 says octets outside US-ASCII are before comparison",
    ("correctness/non-ascii-paths.textproto", 2, "FooBot", "http://foo.bar/foo/bar/ツ"):
        "same: the URL is canonicalised (percent-encoded) before matching",
    ("correctness/non-ascii-paths.textproto", 3, "FooBot", "http://foo.bar/foo/bar/baz"):
        "RFC 9309 §2.2.2, table of examples: the rule /foo/bar/%62%61%7A matches the path /foo/bar/baz",
    ("correctness/user-agent-name.textproto", 0, "Foo Bar", "http://foo.bar/x/y"):
        "Google-specific: --user-agent is a User-Agent header, whose product token ('Foo') selects the group",
}


def test_google_robotstxt_spec_through_robots_check():
    cases = robots_cases()
    assert len(cases) == 400  # the vendored suite is whole
    answers = batch(["robots", "check"], [
        {"robotstxt_b64": base64.b64encode(c.robotstxt).decode(), "url": c.url, "user_agent": c.useragent}
        for c in cases])
    ours = protego = 0
    unexpected = []
    for c, a in zip(cases, answers, strict=True):
        assert a["error"] is None, (c, a)
        ours += a["allowed"] == c.allowed
        protego += Protego.parse(c.robotstxt.decode("utf-8", "replace")).can_fetch(c.url, c.useragent) == c.allowed
        key = (c.file, c.index, c.useragent, c.url)
        if a["allowed"] != c.allowed and key not in RFC_DIFFERENCES:
            unexpected.append((key, c.allowed, a["rule"]))
        if key in RFC_DIFFERENCES:
            assert a["allowed"] != c.allowed, f"listed difference now agrees: {key}"
        # the rule named is the one that decided
        if a["rule"].startswith(("allow:", "disallow:")):
            assert a["rule"].startswith("allow:") == a["allowed"], (key, a)
    assert not unexpected, unexpected
    assert ours == 400 - len(RFC_DIFFERENCES) and ours >= protego, (ours, protego)
    standard_failed = [k for k in RFC_DIFFERENCES if not any(
        (c.file, c.index, c.useragent, c.url) == k and c.google_specific for c in cases)]
    assert len(standard_failed) == 7  # every standard case passes but the 7 RFC-justified ones


def test_robots_product_token_and_bom(tmp_path):
    """RFC 9309 §2.2.1: the group's product token must equal ours (``ray`` is not ``raycrawl``); a
    truncated byte-order mark does not swallow the first group."""
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: ray\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n")
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "robots", "check", "--user-agent", "raycrawl/0.1",
                           str(robots), "http://a.test/x", "http://a.test/private/y"], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout.splitlines()[0].startswith("allowed")
    assert "disallow: /private" in proc.stdout.splitlines()[1]
    robots.write_bytes(b"\xef\xbbUser-agent: raycrawl\nDisallow: /a\n")
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "robots", "check", "--user-agent", "RayCrawl",
                           str(robots), "http://a.test/a"], capture_output=True, text=True)
    assert proc.stdout.startswith("disallowed")


# --- WHATWG URL Standard -------------------------------------------------------------------------
# The canonical form drops a host's trailing dot; a host of dots only is then empty.
URL_DIFFERENCES = {
    ("http://./", None): "canonical form: the trailing dot of a host is dropped, leaving no host",
    ("http://../", None): "canonical form: the trailing dot of a host is dropped, leaving no host",
}
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _norm(part: str) -> str:
    return _PCT.sub(lambda m: chr(int(m.group(1), 16)) if chr(int(m.group(1), 16)) in _UNRESERVED
                    else "%" + m.group(1).upper(), part)


def same_resource(href: str) -> str:
    """The Standard's href reduced by RFC 3986 §6.2.2 equivalences (independently of raycrawl's code):
    no fragment, no user info, no trailing host dot, unreserved escapes decoded."""
    p = urlsplit(href)
    host = p.netloc.rsplit("@", 1)[-1]
    name, port = (host, "")
    if not host.endswith("]") and ":" in host:
        name, _, port = host.rpartition(":")
    name = name if name.startswith("[") else name.rstrip(".")
    return f"{p.scheme}://{name}{':' + port if port else ''}{_norm(p.path)}" + (f"?{_norm(p.query)}" if p.query else "")


def test_whatwg_url_suite_through_url_command():
    data = [c for c in json.loads((CONF / "whatwg_url" / "urltestdata.json").read_text(encoding="utf-8"))
            if isinstance(c, dict)]
    assert len(data) > 800
    answers = batch(["url"], [{"input": c["input"], "base": c.get("base")} for c in data])
    http = same = failures = rejected = 0
    wrong = []
    for c, a in zip(data, answers, strict=True):
        key = (c["input"], c.get("base"))
        if c.get("failure"):
            failures += 1
            rejected += a["canonical"] is None
            if a["canonical"] is not None:
                wrong.append(("accepted what the Standard rejects", key, a["canonical"]))
            continue
        if not c["href"].startswith(("http:", "https:")):
            if a["canonical"] is not None:
                wrong.append(("accepted a non-http(s) URL", key, a["canonical"]))
            continue
        http += 1
        if a["canonical"] == same_resource(c["href"]):
            same += 1
        elif key not in URL_DIFFERENCES:
            wrong.append(("another resource", key, c["href"], a["canonical"]))
    assert not wrong, wrong[:20]
    assert failures == rejected > 200  # wherever the Standard fails, raycrawl rejects
    assert http > 200 and same / http >= 0.99 and same == http - len(URL_DIFFERENCES)


@pytest.mark.parametrize(("raw", "base", "expected"), [
    ("\\x", "http://example.org/foo/bar", "http://example.org/x"),  # backslash is a slash
    ("///test/p", "http://example.org/", "http://test/p"),
    ("https:h2.test/p", "http://other.test/", "https://h2.test/p"),
    ("http://faß.example/", None, "http://xn--fa-hia.example/"),  # UTS #46, not IDNA 2003 (fass)
    ("http://0x7f.1/", None, "http://127.0.0.1/"),
    ("http://%41.com/", None, "http://a.com/"),
    ("http://a b/", None, None), ("http://a%00b/", None, None), ("http://1.2.3.4.5/", None, None),
    ("http://ex.test\uff0e/", None, "http://ex.test/"),
])
def test_browser_resolution_and_idempotence(raw, base, expected):
    from raycrawl.urls import canonicalize

    got = canonicalize(raw, base)
    assert got == expected
    if got is not None:
        assert canonicalize(got) == got


# --- w3lib canonicalize_url ------------------------------------------------------------------------
_QUERY_KEPT = "raycrawl keeps the query verbatim and in order (a server may depend on its order and form)"
_USERINFO = "raycrawl drops user info (the same resource; credentials are never crawled)"
_LEGACY = ("a character the page's encoding cannot represent becomes &#N; (URL Standard), "
           "not UTF-8 as in w3lib")
W3LIB_DIFFERENCES = {3: _QUERY_KEPT, 4: _QUERY_KEPT, 7: _QUERY_KEPT, 8: _QUERY_KEPT, 9: _QUERY_KEPT,
                     10: _QUERY_KEPT, 11: _QUERY_KEPT, 12: _QUERY_KEPT, 13: _QUERY_KEPT, 31: _QUERY_KEPT,
                     39: _QUERY_KEPT, 32: _USERINFO, 33: _USERINFO, 41: _USERINFO, 42: _USERINFO,
                     18: _LEGACY, 19: _LEGACY,
                     25: "%2C is a reserved character: decoding it could change the URL (RFC 3986 §2.2)"}


def test_w3lib_canonicalize_url_cases():
    from raycrawl.urls import canonicalize

    cases = json.loads((CONF / "w3lib" / "canonicalize_url_cases.json").read_text(encoding="utf-8"))["cases"]
    assert len(cases) == 45
    for i, (raw, kw, expected) in enumerate(cases):
        got = canonicalize(raw, None, kw.get("encoding"))
        if i in W3LIB_DIFFERENCES:
            assert got != expected, f"case {i} listed as a difference but agrees"
            assert got is not None and canonicalize(got) == got
        else:
            assert got == expected, (i, raw, got, expected)


@pytest.mark.parametrize("argv", [
    ["url"], ["robots", "check"], ["robots", "check", "/no/such/robots.txt", "http://a.test/"],
    ["robots", "check", "--status", "7", "/dev/null", "http://a.test/"], ["links"],
    ["links", "/no/such.html", "--base", "http://a.test/"], ["links", "/dev/null", "--base", "ftp://a.test/"],
])
def test_inspection_commands_bad_input_one_line_exit_2(argv):
    proc = subprocess.run([sys.executable, "-m", "raycrawl", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_batch_bad_lines_are_answered_and_counted():
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "url", "--batch"], capture_output=True, text=True,
                          input='{"input": "/x", "base": "http://a.test/"}\nnot json\n[1]\n{"base": null}\n', timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 2 and lines[0]["canonical"] == "http://a.test/x"
    assert [x.get("line") for x in lines[1:]] == [2, 3, 4] and all(x["error"] for x in lines[1:])


# --- web-platform-tests: parse a srcset attribute ----------------------------------------------
def test_wpt_srcset_candidates_hold_the_browsers_pick():
    """Each case of WPT's ``parse-a-srcset-attribute.html`` names the candidate a browser shows
    (``currentSrc``; empty when none is valid): it must be among the URLs core/requisites.py
    splits the attribute into, so a crawl archives what a browser displays. (We fetch every
    candidate, valid descriptors or not, as wpull and Heritrix do.)"""
    from raycrawl.requisites import srcset_urls
    from raycrawl.text import html_tree

    tree = html_tree((CONF / "wpt_srcset" / "parse-a-srcset-attribute.html").read_text(encoding="utf-8"))
    cases = [(img.attributes.get("srcset") or "", img.attributes.get("data-expect") or "") for img in tree.css("img")]
    assert len(cases) == 105
    missed = [(srcset, expect) for srcset, expect in cases if expect and expect not in srcset_urls(srcset)]
    assert not missed, missed
    picked = sum(1 for _, expect in cases if expect)
    assert picked > 60  # (most cases name a pick)
