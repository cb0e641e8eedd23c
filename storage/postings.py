"""Inverted lists of a fragment index: postings ``(fragID, f, p_0 … p_{f-1})`` in blocks of
:data:`BLOCK` postings with a skip table, so a query can jump to the block holding a fragID without
decoding the list before it.

FragID gaps are var-byte (the paper's byte-aligned baseline, seed 004 §3: 7 payload bits per byte,
the high bit marks a value's last byte; bit-packing them measured 10 % larger, short lists paying
for their largest gap). f is *bit-packed* per block — one byte giving the width ``w`` of the
block's largest value, then its values in ``w`` bits each (little-endian bit order) — as var-byte
would spend a byte on a number that is 1 in 83 % of postings (stored as f − 1: a block of ones is
its width byte alone). A position is below its fragment's length
L (~50 words), which the index knows (its fragment table), so positions are written in L's
truncated binary code (⌊log2 L⌋ or one more bit each), in one bit stream per list; queries never
read them (BM25 needs f), phrase checks and snippets do. Gaps and f are decoded by compiled code in
tasks/query_kernel.py.

One list's bytes (``encode_list``)::

    vbyte(n)  [skip table]  vbyte(fragID gaps) × n  packed(f − 1) per block  position gaps, truncated binary below L

FragIDs are strictly increasing (gap of the first = its value, the others from the previous
posting, across blocks too); positions are offsets from the start of the fragment, gap-coded inside
one posting (first = its value). A list of more than :data:`BLOCK` postings has a skip table
after ``n``: ``vbyte(its byte length)`` then, per block,
``vbyte(last fragID − the previous block's last) vbyte(bytes of the block's gaps) vbyte(bytes of
its packed f)``; a shorter list (most terms) has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

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


def pack_bits(values: np.ndarray, width: int) -> bytes:
    """``values`` (each < 2**width) in ``width`` bits each, little-endian bit order."""
    vals = np.asarray(values, dtype=np.uint64)
    if width == 0 or vals.size == 0:
        return b""
    bits = ((vals[:, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits.ravel(), bitorder="little").tobytes()


def unpack_bits(arr: np.ndarray, pos: int, n: int, width: int) -> tuple[np.ndarray, int]:
    """(``n`` values of ``width`` bits at ``arr[pos]`` as int64, position after them)."""
    if width == 0 or n == 0:
        return np.zeros(n, dtype=np.int64), pos
    end = pos + (n * width + 7) // 8
    bits = np.unpackbits(arr[pos:end], bitorder="little")[: n * width].reshape(n, width)
    return bits.astype(np.int64) @ (np.int64(1) << np.arange(width, dtype=np.int64)), end


def pack_block(values: np.ndarray) -> bytes:
    """One packed block: a byte with the width of the largest value, then the values in that width."""
    vals = np.asarray(values, dtype=np.int64)
    width = int(vals.max()).bit_length() if vals.size else 0
    assert width <= 56, "bit-packed values must fit 56 bits"  # the compiled reader's limit
    return bytes([width]) + pack_bits(vals, width)


def unpack_block(arr: np.ndarray, pos: int, n: int) -> tuple[np.ndarray, int]:
    """Inverse of :func:`pack_block` for a block of ``n`` values at ``arr[pos]``."""
    return unpack_bits(arr, pos + 1, n, int(arr[pos]))


def pack_blocks(values: np.ndarray, block: int = BLOCK) -> bytes:
    """``values`` as consecutive packed blocks of ``block`` values (the last may be shorter)."""
    vals = np.asarray(values, dtype=np.int64)
    return b"".join(pack_block(vals[i: i + block]) for i in range(0, vals.size, block))


def unpack_blocks(arr: np.ndarray, pos: int, n: int, block: int = BLOCK) -> tuple[np.ndarray, int]:
    """Inverse of :func:`pack_blocks`: (``n`` values, position after them)."""
    parts = []
    for i in range(0, n, block):
        vals, pos = unpack_block(arr, pos, min(block, n - i))
        parts.append(vals)
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), pos


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


def encode_list(frags: np.ndarray, freqs: np.ndarray, positions: np.ndarray, lengths: np.ndarray) -> bytes:
    """Bytes of one inverted list (layout in the module docstring); ``lengths[i]``: the length in
    words of posting i's fragment, which bounds its positions and so sets their width."""
    frags = np.asarray(frags, dtype=np.int64)
    freqs = np.asarray(freqs, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    assert frags.size == freqs.size == lengths.size and int(freqs.sum()) == positions.size
    assert frags.size == 0 or (frags[0] >= 0 and np.all(np.diff(frags) > 0)), "fragIDs must increase"
    assert np.all(freqs >= 1)
    gaps = np.diff(frags, prepend=0)
    pos_gaps = np.diff(positions, prepend=0)
    # Each posting's first position is stored as is, not as a gap from the previous posting's last.
    firsts = np.cumsum(freqs) - freqs
    pos_gaps[firsts] = positions[firsts]
    assert np.all(pos_gaps >= 0), "positions must increase inside a posting"
    assert np.all(positions < np.repeat(lengths, freqs)), "a position lies inside its fragment"
    f_blocks = [pack_block(freqs[i: i + BLOCK] - 1) for i in range(0, freqs.size, BLOCK)]
    return vbyte_encode(np.array([frags.size])) + _skip_table(frags, gaps, f_blocks) + vbyte_encode(gaps) \
        + b"".join(f_blocks) + _pack_positions(pos_gaps, np.repeat(lengths, freqs))


def _truncated_binary(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(k, u) of the truncated binary code of values below ``lengths`` (L): a value below u takes k
    bits, the others k + 1, where k = ⌊log2 L⌋ and u = 2^(k+1) − L (all k bits when L is a power of 2)."""
    lengths = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
    k = np.frexp(lengths.astype(np.float64))[1].astype(np.int64) - 1
    return k, (np.int64(1) << (k + 1)) - lengths


def _pack_positions(values: np.ndarray, lengths: np.ndarray) -> bytes:
    """Each value (below its L) in truncated binary, one LSB-first bit stream, byte-padded: the
    low k bits hold the codeword's top k bits, then its last bit when it has k + 1."""
    k, u = _truncated_binary(lengths)
    long = values >= u
    c = values + u
    codes = np.where(long, (c >> 1) | ((c & 1) << k), values)
    widths = k + long
    offsets = np.cumsum(widths) - widths
    bits = np.zeros(int(widths.sum()), dtype=np.uint8)
    for b in range(int(widths.max()) if widths.size else 0):
        m = widths > b
        bits[offsets[m] + b] = (codes[m] >> b) & 1
    return np.packbits(bits, bitorder="little").tobytes()


@njit(cache=True)
def _unpack_positions(arr, pos, k, u):  # pragma: no cover - compiled
    out = np.empty(k.size, np.int64)
    bit = pos * 8
    for i in range(k.size):
        x = np.int64(0)
        for b in range(k[i]):
            x |= np.int64((arr[(bit + b) >> 3] >> ((bit + b) & 7)) & 1) << b
        bit += k[i]
        if x >= u[i]:  # a k + 1-bit codeword: one more bit, then back to the value
            x = ((x << 1) | np.int64((arr[bit >> 3] >> (bit & 7)) & 1)) - u[i]
            bit += 1
        out[i] = x
    return out


def _skip_table(frags: np.ndarray, gaps: np.ndarray, f_blocks: list[bytes]) -> bytes:
    if frags.size <= BLOCK:
        return b""
    lasts = frags[BLOCK - 1::BLOCK] if frags.size % BLOCK == 0 else np.append(frags[BLOCK - 1::BLOCK], frags[-1])
    gap_sizes = [len(vbyte_encode(gaps[i: i + BLOCK])) for i in range(0, gaps.size, BLOCK)]
    table = vbyte_encode(np.column_stack((np.diff(lasts, prepend=0), gap_sizes, [len(b) for b in f_blocks])).ravel())
    return vbyte_encode(np.array([len(table)])) + table


def decode_list(buf: bytes | np.ndarray, with_positions: bool = True, frag_len: np.ndarray | None = None,
                ) -> PostingList:
    """Inverse of :func:`encode_list`; positions are decoded only when asked (BM25 needs f only),
    and then need ``frag_len`` (fragID → its length in words: it sets the positions' widths)."""
    arr = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    (n,), used = vbyte_decode(arr, 1)
    n = int(n)
    if n > BLOCK:  # the skip table: for jumping in, not needed to read the whole list
        (table,), skip = vbyte_decode(arr[used:], 1)
        used += skip + int(table)
    vals, used2 = vbyte_decode(arr[used:], n)
    frags = np.cumsum(vals.astype(np.int64))
    f1, at = unpack_blocks(arr, used + used2, n)
    freqs = f1 + 1
    pos_start = np.cumsum(freqs) - freqs
    if with_positions:
        if frag_len is None:
            raise ValueError("decoding positions needs the fragment lengths")
        k, u = _truncated_binary(np.repeat(np.asarray(frag_len)[frags], freqs))
        gaps = _unpack_positions(arr, at, k, u)
        # Undo the per-posting gap coding: cumulative sum restarted at each posting's first position.
        cs = np.cumsum(gaps)
        base = np.repeat(cs[pos_start] - gaps[pos_start], freqs) if n else cs
        positions = cs - base
    else:
        positions = np.zeros(0, dtype=np.int64)
    return PostingList(frags, freqs, positions, pos_start)
