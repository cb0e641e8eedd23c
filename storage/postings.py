"""Inverted lists of a fragment index: postings ``(fragID, f, p_0 … p_{f-1})`` compressed with var-byte,
in blocks of :data:`BLOCK` postings with a skip table, so a query can jump to the block holding a
fragID without decoding the list before it.

Var-byte (the paper's byte-aligned baseline, seed 004 §3) is vectorised with numpy here and
compiled in tasks/query_kernel.py: 7 payload bits per byte, the high bit marks a value's last byte.

One list's bytes (``encode_list``)::

    vbyte(n)  [skip table]  vbyte(fragID gaps) × n  vbyte(f) × n  vbyte(position gaps) × Σf

FragIDs are strictly increasing (gap of the first = its value, the others from the previous
posting, across blocks too); positions are offsets from the start of the fragment, gap-coded inside
one posting (first = its value). A list of more than :data:`BLOCK` postings has a skip table
after ``n``: ``vbyte(its byte length)`` then, per block of :data:`BLOCK` postings,
``vbyte(last fragID − the previous block's last) vbyte(bytes of the block's gaps) vbyte(bytes of
its f)``; a shorter list (most terms) has none, and costs nothing more than plain var-byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MAX_BYTES = 10  # 64-bit values need at most 10 groups of 7 bits
BLOCK = 128  # postings per block (a block's gaps and f decode in one pass; the skip table has one entry each)


def vbyte_encode(values: np.ndarray) -> bytes:
    """Var-byte bytes of non-negative integers (little-endian 7-bit groups, stop bit 0x80 on the last)."""
    vals = np.asarray(values, dtype=np.uint64)
    if vals.size == 0:
        return b""
    nb = np.ones(vals.size, dtype=np.int64)
    for k in range(1, _MAX_BYTES):
        nb += vals >= np.uint64(1 << (7 * k)) if 7 * k < 64 else 0
    starts = np.cumsum(nb) - nb
    out = np.zeros(int(nb.sum()), dtype=np.uint8)
    for k in range(int(nb.max())):
        m = nb > k
        out[starts[m] + k] = ((vals[m] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
    out[starts + nb - 1] |= 0x80
    return out.tobytes()


def vbyte_decode(buf: bytes | np.ndarray, count: int | None = None) -> tuple[np.ndarray, int]:
    """(the first ``count`` values — all if None — as uint64, bytes consumed)."""
    arr = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    ends = np.flatnonzero(arr & 0x80)
    if count is not None:
        if count > ends.size:
            raise ValueError(f"var-byte stream holds {ends.size} values, {count} asked")
        ends = ends[:count]
    if ends.size == 0:
        return np.zeros(0, dtype=np.uint64), 0
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    vals = np.zeros(ends.size, dtype=np.uint64)
    for k in range(int(lengths.max())):
        m = lengths > k
        vals[m] |= (arr[starts[m] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return vals, int(ends[-1]) + 1


@dataclass(slots=True)
class PostingList:
    """One term's decoded list: ``frags`` strictly increasing, ``freqs[i]`` ≥ 1, and the positions
    of posting i are ``positions[pos_start[i]:pos_start[i] + freqs[i]]``."""

    frags: np.ndarray     # int64
    freqs: np.ndarray     # int64
    positions: np.ndarray  # int64, offsets from the start of the fragment
    pos_start: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.frags.size)

    def positions_of(self, i: int) -> np.ndarray:
        s = int(self.pos_start[i])
        return self.positions[s: s + int(self.freqs[i])]


def encode_list(frags: np.ndarray, freqs: np.ndarray, positions: np.ndarray) -> bytes:
    """Bytes of one inverted list (layout in the module docstring)."""
    frags = np.asarray(frags, dtype=np.int64)
    freqs = np.asarray(freqs, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    assert frags.size == freqs.size and int(freqs.sum()) == positions.size
    assert frags.size == 0 or (frags[0] >= 0 and np.all(np.diff(frags) > 0)), "fragIDs must increase"
    assert np.all(freqs >= 1)
    gaps = np.diff(frags, prepend=0)
    pos_gaps = np.diff(positions, prepend=0)
    # Each posting's first position is stored as is, not as a gap from the previous posting's last.
    firsts = np.cumsum(freqs) - freqs
    pos_gaps[firsts] = positions[firsts]
    assert np.all(pos_gaps >= 0), "positions must increase inside a posting"
    return vbyte_encode(np.array([frags.size])) + _skip_table(frags, gaps, freqs) + vbyte_encode(gaps) \
        + vbyte_encode(freqs) + vbyte_encode(pos_gaps)


def _skip_table(frags: np.ndarray, gaps: np.ndarray, freqs: np.ndarray) -> bytes:
    if frags.size <= BLOCK:
        return b""
    lasts = frags[BLOCK - 1::BLOCK] if frags.size % BLOCK == 0 else np.append(frags[BLOCK - 1::BLOCK], frags[-1])
    sizes = [[len(vbyte_encode(a[i: i + BLOCK])) for i in range(0, a.size, BLOCK)] for a in (gaps, freqs)]
    table = vbyte_encode(np.column_stack((np.diff(lasts, prepend=0), sizes[0], sizes[1])).ravel())
    return vbyte_encode(np.array([len(table)])) + table


def decode_list(buf: bytes | np.ndarray, with_positions: bool = True) -> PostingList:
    """Inverse of :func:`encode_list`; positions are decoded only when asked (BM25 needs f only)."""
    arr = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    (n,), used = vbyte_decode(arr, 1)
    n = int(n)
    if n > BLOCK:  # the skip table: for jumping in, not needed to read the whole list
        (table,), skip = vbyte_decode(arr[used:], 1)
        used += skip + int(table)
    vals, used2 = vbyte_decode(arr[used:], 2 * n)
    frags = np.cumsum(vals[:n].astype(np.int64))
    freqs = vals[n:].astype(np.int64)
    pos_start = np.cumsum(freqs) - freqs
    if with_positions:
        gaps, _ = vbyte_decode(arr[used + used2:], int(freqs.sum()))
        gaps = gaps.astype(np.int64)
        # Undo the per-posting gap coding: cumulative sum restarted at each posting's first position.
        cs = np.cumsum(gaps)
        base = np.repeat(cs[pos_start] - gaps[pos_start], freqs) if n else cs
        positions = cs - base
    else:
        positions = np.zeros(0, dtype=np.int64)
    return PostingList(frags, freqs, positions, pos_start)
