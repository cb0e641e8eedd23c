"""The tables of a fragment index on disk, compact: what a query reads is kept apart from what only
updates or the result page read, so each can be measured (docs/search.md) and a query server need
not load the rest.

``query.bin`` (msgpack of a few byte strings; beside ``postings.bin`` it is all a query reads):

* **dictionary** — the terms in list order, front-coded (per term: bytes shared with the previous
  term and the suffix's length, two nibbles in one byte when they fit, then the suffix, UTF-8),
  then each list's byte length and posting count (var-byte). A list's offset is the sum of the lengths before it, so none is stored.
* **version df** — per term, the versions holding it in each epoch: a terms × epochs matrix, each
  row bit-packed in the width of its largest value (``storage.postings.pack_block``: rare terms,
  most of them, take a bit or two an epoch).
* **versions** — per version its page (zigzag difference from the previous version's), epoch (index
  into the epoch list) and its fragIDs (count, then zigzag differences from the previous fragID: a
  first version's fragments are consecutive), var-byte; its length in terms is its fragments'.
* **fragments** — fragIDs are numbered by (primary page, ordinal), so the fragment table is each
  page's number of primary fragments (an ordinal is its fragID minus the page's first) plus each
  fragment's length; the reuse table (global sharing) is the shared fragIDs and their later pages.

``pages.msgpack`` (the result page): URL, PageRank, spam score, snippet and captures per page.
``update.msgpack`` (resuming a build): the fragment hash table.
"""

from __future__ import annotations

import numpy as np

from raycrawl.storage.postings import pack_block, vbyte_decode, vbyte_encode

QUERY_FILE, PAGES_FILE, UPDATE_FILE = "query.bin", "pages.msgpack", "update.msgpack"


def zigzag(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    return (v << 1) ^ (v >> 63)


def unzigzag(u: np.ndarray) -> np.ndarray:
    u = np.asarray(u, dtype=np.int64)
    return (u >> 1) ^ -(u & 1)


def _vb(values) -> bytes:
    return vbyte_encode(np.asarray(values, dtype=np.int64))


def _unvb(buf: bytes, count: int) -> np.ndarray:
    return vbyte_decode(buf, count)[0].astype(np.int64) if count else np.zeros(0, dtype=np.int64)


def unpack_rows(buf: bytes, rows: int, width: int) -> np.ndarray:
    """A ``rows`` × ``width`` matrix whose rows were written by ``pack_block`` one after the other:
    the rows' offsets in one pass over their width bytes, then the rows of each width at once."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts = np.empty(rows, dtype=np.int64)
    pos = 0
    for i in range(rows):
        starts[i] = pos
        pos += 1 + (width * int(arr[pos]) + 7) // 8
    out = np.zeros((rows, width), dtype=np.int64)
    widths = arr[starts] if rows else np.zeros(0, np.uint8)
    for w in np.unique(widths).tolist():
        if w == 0:
            continue
        sel = np.flatnonzero(widths == w)
        nbytes = (width * w + 7) // 8
        block = arr[(starts[sel] + 1)[:, None] + np.arange(nbytes)]
        bits = np.unpackbits(block, axis=1, bitorder="little")[:, : width * w].reshape(sel.size, width, w)
        out[sel] = bits.astype(np.int64) @ (np.int64(1) << np.arange(w, dtype=np.int64))
    return out


def front_code(terms: list[str]) -> bytes:
    """Terms front-coded: per term one byte (shared prefix length, suffix length) as two nibbles when
    both are below 15, else 0xFF then a byte each; then the suffix (UTF-8)."""
    out = bytearray()
    prev = b""
    for t in terms:
        cur = t.encode()
        shared = 0
        limit = min(len(prev), len(cur), 255)
        while shared < limit and prev[shared] == cur[shared]:
            shared += 1
        suffix = cur[shared:]
        assert len(suffix) < 256, "a term longer than 255 bytes"
        out += bytes([shared << 4 | len(suffix)]) if shared < 15 and len(suffix) < 15 else bytes([255, shared, len(suffix)])
        out += suffix
        prev = cur
    return bytes(out)


def front_decode(buf: bytes, count: int) -> list[str]:
    terms, prev, pos = [], b"", 0
    for _ in range(count):
        head = buf[pos]
        if head == 255:
            shared, n = buf[pos + 1], buf[pos + 2]
            pos += 3
        else:
            shared, n = head >> 4, head & 15
            pos += 1
        prev = prev[:shared] + buf[pos: pos + n]
        pos += n
        terms.append(prev.decode())
    return terms


def encode_query_tables(ix) -> dict:
    """The fields of ``query.bin`` of a :class:`~raycrawl.storage.fragment_index.FragmentIndex`
    (layout above; the caller adds the format tag and packs them)."""
    terms = list(ix.dictionary)
    assert ix.version_df.keys() <= ix.dictionary.keys(), "every term of a version is in an indexed fragment"
    entries = np.array([ix.dictionary[t] for t in terms], dtype=np.int64).reshape(-1, 3)
    assert np.array_equal(entries[:, 0], np.cumsum(entries[:, 1]) - entries[:, 1]), "lists must lie in term order"
    epochs = sorted({v.epoch for v in ix.versions} | {e for d in ix.version_df.values() for e in d})
    col = {e: i for i, e in enumerate(epochs)}
    df = np.zeros((len(terms), len(epochs)), dtype=np.int64)
    for i, t in enumerate(terms):
        for e, n in ix.version_df.get(t, {}).items():
            df[i, col[e]] = n
    frag_page = np.asarray(ix.frag_page, dtype=np.int64)
    assert frag_page.size == 0 or np.all(np.diff(frag_page) >= 0), "fragIDs must be numbered by primary page"
    per_page = np.bincount(frag_page, minlength=len(ix.urls)) if frag_page.size else np.zeros(len(ix.urls), np.int64)
    firsts = np.cumsum(per_page) - per_page
    assert np.array_equal(np.asarray(ix.frag_ordinal), np.arange(frag_page.size) - firsts[frag_page]), \
        "a page's fragments must be numbered by ordinal"
    vs = ix.versions
    frags = np.array([f for v in vs for f in v.frags], dtype=np.int64)
    assert all(v.length == sum(int(ix.frag_len[f]) for f in v.frags) for v in vs), "a version is its fragments"
    reuse_ids = np.array(sorted(ix.reuse), dtype=np.int64)
    reuse_pages = [p for fid in reuse_ids.tolist() for p in ix.reuse[fid]]
    return {
        "policy": ix.policy, "b": ix.b, "w": ix.w, "pages": len(ix.urls), "epochs": epochs, "stats": ix.stats,
        "terms": len(terms), "dictionary": front_code(terms), "list_bytes": _vb(entries[:, 1]),
        "list_postings": _vb(entries[:, 2]),
        "df": b"".join(pack_block(row) for row in df),
        "versions": len(vs), "v_page": _vb(zigzag(np.diff([v.page for v in vs], prepend=0))),
        "v_epoch": _vb([col[v.epoch] for v in vs]),
        "v_nfrags": _vb([len(v.frags) for v in vs]), "v_frags": _vb(zigzag(np.diff(frags, prepend=0))),
        "frags": int(frag_page.size), "page_frags": _vb(per_page), "frag_len": _vb(ix.frag_len),
        "reused": int(reuse_ids.size), "reuse_ids": _vb(np.diff(reuse_ids, prepend=0)),
        "reuse_counts": _vb([len(ix.reuse[f]) for f in reuse_ids.tolist()]), "reuse_pages": _vb(reuse_pages),
    }


def decode_query_tables(t: dict) -> dict:
    """The fields :class:`FragmentIndex` is built from (``versions`` as (page, epoch, length, frags)),
    from ``query.bin``'s unpacked fields."""
    n_terms, n_versions, n_frags, n_pages = t["terms"], t["versions"], t["frags"], t["pages"]
    terms = front_decode(t["dictionary"], n_terms)
    nbytes, counts = _unvb(t["list_bytes"], n_terms), _unvb(t["list_postings"], n_terms)
    offsets = np.cumsum(nbytes) - nbytes
    epochs = t["epochs"]
    df = unpack_rows(t["df"], n_terms, len(epochs))
    version_df = {}
    for term, row in zip(terms, df.tolist(), strict=True):
        version_df[term] = {e: n for e, n in zip(epochs, row, strict=True) if n}
    v_page = np.cumsum(unzigzag(_unvb(t["v_page"], n_versions)))
    v_epoch = np.asarray(epochs, dtype=np.int64)[_unvb(t["v_epoch"], n_versions)]
    nf = _unvb(t["v_nfrags"], n_versions)
    flat_ids = np.cumsum(unzigzag(_unvb(t["v_frags"], int(nf.sum()))))
    flat = flat_ids.tolist()
    ends = np.cumsum(nf).tolist()
    frag_len = _unvb(t["frag_len"], n_frags)
    # a version's length is its fragments' (they partition its terms)
    v_len = np.add.reduceat(frag_len[flat_ids], np.cumsum(nf) - nf) if flat_ids.size else np.zeros(n_versions, np.int64)
    v_len[nf == 0] = 0
    versions = [(p, e, n, flat[z - k: z]) for p, e, n, k, z in
                zip(v_page.tolist(), v_epoch.tolist(), v_len.tolist(), nf.tolist(), ends, strict=True)]
    per_page = _unvb(t["page_frags"], n_pages)
    frag_page = np.repeat(np.arange(n_pages, dtype=np.int64), per_page)
    firsts = np.cumsum(per_page) - per_page
    reuse_ids = np.cumsum(_unvb(t["reuse_ids"], t["reused"])).tolist()
    reuse_counts = _unvb(t["reuse_counts"], t["reused"])
    users = _unvb(t["reuse_pages"], int(reuse_counts.sum())).tolist()
    cuts = np.cumsum(reuse_counts).tolist()
    return {
        "policy": t["policy"], "b": t["b"], "w": t["w"], "stats": t["stats"], "pages": n_pages,
        "dictionary": {term: (int(o), int(b), int(c)) for term, o, b, c in zip(terms, offsets, nbytes, counts, strict=True)},
        "version_df": version_df, "versions": versions, "frag_page": frag_page,
        "frag_ordinal": np.arange(n_frags, dtype=np.int64) - firsts[frag_page],
        "frag_len": frag_len,
        "reuse": {f: users[z - k: z] for f, k, z in zip(reuse_ids, reuse_counts.tolist(), cuts, strict=True)},
    }
