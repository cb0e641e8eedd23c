"""URL map: sort keys and the compressed URL ⇄ id map."""

from __future__ import annotations

import random

import pytest

from raycrawl.storage.urlmap import key_to_url, url_sort_key


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


def _urls(rng, n):
    words = ["alpha", "beta", "gamma", "delta", "news", "index", "pub", "~user", "caf%C3%A9"]
    hosts = [f"{rng.choice(['', 'www.', 'a.b.'])}h{rng.randrange(40)}.test" for _ in range(60)]
    out = []
    for _ in range(n):
        path = "/".join(rng.choice(words) for _ in range(rng.randrange(0, 4)))
        port = rng.choice(["", "", ":8080"])
        scheme = rng.choice(["http", "http", "https"])
        q = rng.choice(["", "", f"?page={rng.randrange(9)}"])
        out.append(f"{scheme}://{rng.choice(hosts)}{port}/{path}{q}")
    out += ["mailto:x@y.test", "http://h1.test", "http://127.0.0.1/", "http://[::1]:81/v6"]
    return out


@pytest.mark.parametrize("block_size", [1, 3, 32, 5000])
def test_map_round_trip(tmp_path, block_size):
    import random

    from raycrawl.storage.urlmap import UrlMap

    urls = _urls(random.Random(block_size), 3000)
    expected = sorted(set(urls), key=url_sort_key)
    m = UrlMap.build(urls + urls[:100], tmp_path / "u.map", block_size=block_size)
    assert len(m) == len(expected)
    assert list(m) == expected
    # Every id for small blocks; a sample for big ones (each lookup decodes up to block_size keys).
    for i in range(0, len(expected), max(1, block_size // 16)):
        assert m.url_of(i) == expected[i]
        assert m.id_of(expected[i]) == i
    for absent in ["http://zzz.test/", "http://h1.test/nothere", "", "http://a.test/" + "x" * 500, "aaa"]:
        assert m.id_of(absent) == -1
    with pytest.raises(IndexError):
        m.url_of(len(m))
    reopened = UrlMap.open(tmp_path / "u.map")
    assert reopened.url_of(len(m) - 1) == expected[-1] and reopened.block_size == block_size


def test_empty_map(tmp_path):
    from raycrawl.storage.urlmap import UrlMap

    m = UrlMap.build([], tmp_path / "e.map")
    assert len(m) == 0 and list(m) == [] and m.id_of("http://a.test/") == -1


def test_corrupt_map_is_user_error(tmp_path):
    import random

    from raycrawl.errors import UserError
    from raycrawl.storage.urlmap import UrlMap

    urls = _urls(random.Random(9), 2000)
    m = UrlMap.build(urls, tmp_path / "u.map", block_size=16)
    data = (tmp_path / "u.map").read_bytes()
    (tmp_path / "t.map").write_bytes(data[: len(data) - 10])
    with pytest.raises(UserError, match="truncated|corrupt"):
        UrlMap.open(tmp_path / "t.map")
    (tmp_path / "x.map").write_bytes(b"garbage" * 10)
    with pytest.raises(UserError):
        UrlMap.open(tmp_path / "x.map")
    with pytest.raises(UserError, match="cannot read"):
        UrlMap.open(tmp_path / "missing.map")
    # A damaged block is reported when touched; the others still work.
    bad = bytearray(data)
    start = m._offsets[3]
    bad[start : start + 8] = b"\xff" * 8
    (tmp_path / "b.map").write_bytes(bytes(bad))
    b = UrlMap.open(tmp_path / "b.map")
    assert b.url_of(0) == m.url_of(0)
    with pytest.raises(UserError, match="block 3"):
        for i in range(3 * 16, 4 * 16):
            assert b.url_of(i) == m.url_of(i)


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_the_seeds_gzipped_blocks_map_urls_to_their_lexicographic_rank(fixed, block_size):
    """Seed 002 §2.1-2.2 (storage/url_blocks.py): a URL's id is its rank in plain sorted order
    (Python's sorted() is the independent reference), both ways, with and without padding; URLs not
    in the set and ids out of range are refused."""
    from raycrawl.storage.url_blocks import GzipBlockUrls

    rng = random.Random(block_size)
    urls = list({f"http://h{rng.randrange(30)}.test/{'a' * rng.randrange(12)}{rng.randrange(999)}" for _ in range(400)})
    m = GzipBlockUrls(urls, block_size=block_size, fixed_length=fixed)
    ranked = sorted(u.encode() for u in urls)
    for i, u in enumerate(ranked):
        assert m.id_of(u.decode()) == i and m.url_of(i) == u.decode()
    assert m.id_of("http://h0.test/not-there") is None and m.id_of("") is None
    with pytest.raises(IndexError):
        m.url_of(len(urls))
    assert m.size_bytes > m.blocks_bytes > 0
