"""Fragment index: var-byte/postings round trip, winnowing properties, sharing policies, save/load."""

from __future__ import annotations

import random

import numpy as np
import pytest

from raycrawl.storage.fragment_index import FragmentIndex, FragmentIndexBuilder
from raycrawl.storage.postings import (
    BLOCK,
    decode_list,
    encode_list,
    pack_blocks,
    unpack_blocks,
    vbyte_decode,
    vbyte_encode,
)
from raycrawl.tasks.index_build import build_index, websim_versions
from raycrawl.winnowing import fragments, winnow_cuts, word_bytes


def test_vbyte_round_trip_edges_and_random():
    rng = np.random.default_rng(3)
    vals = np.concatenate([np.array([0, 1, 127, 128, 16383, 16384, 2**63 - 1, 2**64 - 1], dtype=np.uint64),
                           rng.integers(0, 2**40, 5000, dtype=np.uint64)])
    buf = vbyte_encode(vals)
    out, used = vbyte_decode(buf)
    assert used == len(buf)
    assert np.array_equal(out, vals)
    # One byte per value below 128: the size is what var-byte promises.
    assert len(vbyte_encode(np.arange(128))) == 128


def test_bit_packed_blocks_round_trip_and_size():
    rng = np.random.default_rng(4)
    for vals in (np.zeros(300, np.int64), np.arange(5), rng.integers(0, 2**40, 1000), np.array([2**56 - 1, 0, 3]),
                 np.zeros(0, np.int64)):
        buf = b"xy" + pack_blocks(vals)
        out, end = unpack_blocks(np.frombuffer(buf, np.uint8), 2, vals.size)
        assert out.tolist() == vals.tolist() and end == len(buf)
    # a block of zeros is its width byte alone; values below 8 take 3 bits each
    assert len(pack_blocks(np.zeros(3 * BLOCK, np.int64))) == 3
    assert len(pack_blocks(np.full(BLOCK, 7))) == 1 + 3 * BLOCK // 8


def test_postings_round_trip_exact():
    rng = random.Random(5)
    frags, freqs, positions = [], [], []
    f = 0
    for i in range(2000):
        f += rng.randint(1, 300)
        n = rng.randint(1, 6) if i % 97 else rng.randint(60, 99)  # a few wide blocks of f and positions
        frags.append(f)
        freqs.append(n)
        positions.extend(sorted(rng.sample(range(100), n)))
    assert len(frags) > 10 * BLOCK
    frag_len = np.zeros(frags[-1] + 1, np.int64)
    frag_len[frags] = [rng.choice((100, 101, 128, 129, 300)) for _ in frags]  # positions take bits(L − 1)
    buf = encode_list(np.array(frags), np.array(freqs), np.array(positions), frag_len[frags])
    pl = decode_list(buf, True, frag_len)
    assert pl.frags.tolist() == frags and pl.freqs.tolist() == freqs and pl.positions.tolist() == positions
    assert pl.positions_of(1).tolist() == positions[freqs[0]: freqs[0] + freqs[1]]
    one_word = decode_list(encode_list([3, 9], [1, 1], [0, 0], [1, 1]), True, np.ones(10, np.int64))  # 0 bits each
    assert one_word.frags.tolist() == [3, 9] and one_word.positions.tolist() == [0, 0]
    with pytest.raises(AssertionError):
        encode_list([3], [1], [5], [5])  # a position outside its fragment


def test_winnowing_bounds_and_shared_fragments():
    rng = random.Random(7)
    words = [f"w{rng.randint(0, 5000)}" for _ in range(3000)]
    for w in (20, 100):
        cuts = winnow_cuts(word_bytes(words), 5, w)
        bounds = [0, *cuts, len(words)]
        sizes = np.diff(bounds)
        assert sizes.min() >= 1 and sizes.max() <= w  # a cut in every window of w hashes
        assert 0.3 * (w + 1) / 2 < sizes.mean() < 2 * (w + 1) / 2
    frs = fragments(words)
    assert sum(frs, []) == words
    # An insertion in the middle changes only the fragments around it (content-defined cuts).
    edited = words[:1500] + ["inserted"] + words[1500:]
    a, b = {tuple(x) for x in frs}, {tuple(x) for x in fragments(edited)}
    assert len(a & b) >= len(a) - 3


def _synthetic_pages(seed: int = 1) -> dict[str, dict[int, list[str]]]:
    """Pages with versions: small edits between epochs and a block copied across pages."""
    rng = random.Random(seed)
    vocab = [f"t{i}" for i in range(400)]
    shared = [rng.choice(vocab) for _ in range(300)]
    pages = {}
    for p in range(30):
        base = [rng.choice(vocab) for _ in range(rng.randint(50, 500))]
        if p % 3 == 0:
            base = base[: len(base) // 2] + shared + base[len(base) // 2:]
        vs = {}
        for e in range(4):
            vs[e] = list(base)
            i = rng.randrange(len(base))
            base[i: i + 3] = [rng.choice(vocab) for _ in range(rng.randint(0, 5))]
        pages[f"http://p{p:02d}.test/"] = vs
    return pages


def test_policies_order_positions_and_reuse_table():
    pages = _synthetic_pages()
    total = sum(len(ws) for vs in pages.values() for ws in vs.values())
    idx = {pol: build_index(pages, pol, w=30) for pol in ("none", "local", "global")}
    pos = {pol: ix.stats["positions"] for pol, ix in idx.items()}
    assert pos["none"] == total  # no sharing stores every word of every version
    assert pos["global"] <= pos["local"] <= pos["none"]
    assert pos["local"] < 0.6 * pos["none"]  # four versions with small edits
    assert pos["global"] < pos["local"]      # the copied block is stored once
    g = idx["global"]
    assert g.reuse and all(all(q > g.frag_page[f] for q in qs) for f, qs in g.reuse.items())
    assert not idx["local"].reuse
    # Every version's fragments reassemble its terms (the doc/version table is complete).
    for ix in idx.values():
        words_of = {}
        for t in ix.dictionary:
            pl = ix.postings(t, with_positions=True)
            for i, f in enumerate(pl.frags.tolist()):
                for p in pl.positions_of(i).tolist():
                    words_of.setdefault(f, {})[p] = t
        for url, vs in pages.items():
            d = ix.urls.index(url)
            for vid in ix.page_versions[d]:
                v = ix.versions[vid]
                rebuilt = [words_of[f][p] for f in v.frags for p in range(int(ix.frag_len[f]))]
                assert rebuilt == vs[v.epoch]


def test_save_load_round_trip(tmp_path):
    ix = build_index(_synthetic_pages(2), "global", w=30)
    ix.save(tmp_path / "index")
    back = FragmentIndex.load(tmp_path / "index")
    assert back.stats == ix.stats and back.urls == ix.urls and back.reuse == ix.reuse
    assert back.hash_table == ix.hash_table
    # the compact tables (storage/index_tables.py) give back every table exactly
    assert back.dictionary == ix.dictionary and back.version_df == ix.version_df
    assert back.versions == ix.versions and back.page_versions == ix.page_versions
    for name in ("frag_page", "frag_ordinal", "frag_len"):
        assert getattr(back, name).tolist() == getattr(ix, name).tolist(), name
    sizes = FragmentIndex.sizes(tmp_path / "index")
    assert sizes["query"] == sizes["postings"] + sizes["query_tables"] and sizes["postings"] == len(ix.postings_blob)
    for t in list(ix.dictionary)[:50]:
        a, b = ix.postings(t, True), back.postings(t, True)
        assert a.frags.tolist() == b.frags.tolist() and a.positions.tolist() == b.positions.tolist()
    import mmap

    from raycrawl.tasks.query import QueryProcessor

    assert isinstance(back.postings_blob, mmap.mmap)  # queried from the file, not a copy in memory
    for q in (list(ix.dictionary)[:2], list(ix.dictionary)[5:8]):
        assert QueryProcessor(back).search(q, 10, mode="or") == QueryProcessor(ix).search(q, 10, mode="or")
    back.save(tmp_path / "index")  # saving over the mapped file replaces it, the map stays valid
    assert FragmentIndex.load(tmp_path / "index").postings(q[0]).frags.tolist() == back.postings(q[0]).frags.tolist()


def test_builder_rejects_bad_input():
    with pytest.raises(ValueError, match="policy"):
        FragmentIndexBuilder("sometimes")
    with pytest.raises(ValueError):
        winnow_cuts(word_bytes(["a", "b"]), 0, 10)


@pytest.mark.slow
def test_websim_epochs_global_sharing_target():
    """Three websim epochs of a small web: global sharing stores well under half the positions."""
    versions = websim_versions(hosts=15, ips=5, seed=2, epochs=3)
    none = build_index(versions, "none").stats["positions"]
    glob = build_index(versions, "global").stats["positions"]
    assert none == sum(len(t) for vs in versions.values() for t in vs.values())
    assert glob < 0.5 * none
