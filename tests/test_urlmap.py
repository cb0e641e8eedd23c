"""URL map: sort keys and the compressed URL ⇄ id map."""

from __future__ import annotations

import pytest

from storage.urlmap import key_to_url, url_sort_key


def test_sort_key_examples_and_inverse():
    assert url_sort_key("http://www.example.test:8080/a") == "test.example.www!:8080/a"
    assert url_sort_key("https://example.test/") == "test.example!s/"
    for url in ["http://www.example.test:8080/a?b=1", "https://a.b.test/", "http://127.0.0.1/x",
                "http://[::1]:81/p", "ftp://x.test/", "mailto:a@b.test", "http://a.test", "~odd"]:
        assert key_to_url(url_sort_key(url)) == url


def test_sort_key_groups_hosts_and_subdomains():
    urls = ["http://b.example.test/", "http://other.test/z", "http://example.test/a",
            "http://a.example.test/q", "https://example.test/b", "http://example.test:81/", "http://zz.test/"]
    ordered = sorted(urls, key=url_sort_key)
    hosts = [u.split("/")[2].split(":")[0] for u in ordered]
    # All *.example.test pages are contiguous, and each host's pages too.
    ex = [i for i, h in enumerate(hosts) if h.endswith("example.test")]
    assert ex == list(range(ex[0], ex[0] + len(ex)))
    for h in set(hosts):
        idx = [i for i, x in enumerate(hosts) if x == h]
        assert idx == list(range(idx[0], idx[0] + len(idx)))


def test_bad_key():
    with pytest.raises(ValueError):
        key_to_url("NOT A KEY")
