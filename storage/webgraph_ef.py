"""``BASENAME.ef``: the Elias–Fano offsets index that webgraph-rs (and the ``webgraph`` PyPI
package, its Python bindings) needs to open a BV graph.

webgraph-rs does not read ``BASENAME.offsets``: ``BvGraph::with_basename(..).load()`` maps
``BASENAME.ef``, the ``n + 1`` bit offsets of the node records in ``BASENAME.graph`` (``0``
first, the stream length last) as a sux-rs Elias–Fano sequence serialized with ε-serde.  Its
own ``webgraph build ef`` writes it; we cannot install that CLI here, so this module writes
the same bytes from Python.  The versions are the ones the ``webgraph`` 0.2.0 wheel is linked
against: webgraph 0.7.0, sux 0.15.0, epserde 0.13.2.

The type (webgraph-rs's ``EF``) is::

    EliasFano<u64,
              SelectAdaptConst<BitVec<Box<[usize]>>, Box<[usize]>, 11, 3>,
              BitFieldVecU<Box<[u64]>>>

built as ``EliasFanoBuilder::new(n + 1, 8 * len(.graph))``, then ``map_high_bits`` with
``SelectAdaptConst::<_, _, 11, 3>::new`` and ``try_into_unaligned``.

File layout (all integers little-endian, ``usize`` = 8 bytes; scalars are written in place,
unaligned; "pad8" = zero bytes up to a file offset multiple of 8, which ε-serde inserts before
the data of every zero-copy slice so that it can be used in place once the file is mapped)::

    header   "epserde " (8 bytes), major u16 = 2, minor u16 = 0, usize size u8 = 8,
             type hash [u8; 32], alignment hash [u8; 32],
             type name: len usize, UTF-8 bytes
    n        usize   number of values (nodes + 1)
    u        usize   upper bound (bits in the .graph file, a multiple of 8)
    l        usize   low bits per value, floor(log2(u / n)) (0 if u < n)
    first_val usize  the first value (0), cached by sux 0.15
    last_val usize   the last value (the stream length in bits)
    low_bits BitFieldVecU = BitFieldVec: bits (len usize, pad8, len × u64: the l-bit fields,
             LSB first, plus one zero padding word for unaligned reads), bit_width usize = l,
             mask u64 = 2**l - 1, len usize = n
    high_bits SelectAdaptConst:
             bits BitVec: bits (len usize, pad8, words), len usize = n + (u >> l) + 1 bits;
                  value i sets bit (x_i >> l) + i
             inventory (len usize, pad8, words), spill (len usize, pad8, words)

(The field order was read from epserde/sux sources and confirmed against the loader: an
all-zero body must be exactly as long as the fields above for it to parse.)  The hashes
cannot be computed from Python (they hash Rust type structure); they are the
constants the loader printed when handed a file with wrong ones, and they only change with the
type or the library versions, which ``tests/test_webgraph_ef.py`` would catch.

The select inventory (``SelectAdaptConst<_, _, 11, 3>``): for every block of 2¹¹ ones, 9 words
— the position of its first one, then an 8-word sub-inventory — plus one final word holding the
bit-vector length.  The span of a block (distance to the next block's first one) picks the
sub-inventory format, flagged in the top two bits of the first word:

* span ≤ 2¹⁶ (``00``): 32 u16 offsets from the block start, one every 2⁶ ones (entry 0 is 0);
* span ≤ 2³² (``10``): word 1 is an index in ``spill``, words 2–8 hold 14 u32 offsets, one
  every 2^q ones with q = max(0, 6 − (⌊log2(span >> 15)⌋ + 1)); further u32 offsets go to
  ``spill`` from that index;
* larger (``11``): word 1 is an index in ``spill``, words 2–8 the positions of ones 1–7,
  ``spill`` the positions of the block's other ones.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from raycrawl.storage.codes import read_gamma_sequence, words_from_bytes
from raycrawl.storage.java_properties import read_properties

TYPE_NAME = (
    "sux::dict::elias_fano::EliasFano<u64, sux::rank_sel::select_adapt_const::SelectAdaptConst<"
    "sux::bits::bit_vec::BitVec<alloc::boxed::Box<[usize]>>, alloc::boxed::Box<[usize]>, 11, 3>, "
    "sux::bits::bit_field_vec::BitFieldVecU<alloc::boxed::Box<[u64]>>>"
)
# ε-serde 0.13 file format version and the hashes of TYPE_NAME (sux 0.15.0, epserde 0.13.2, x86-64).
EPSERDE_VERSION = (2, 0)
TYPE_HASH = bytes.fromhex("2104224edfab29a9b7f197f9bc1e1f0893fe9a213877443ffefcdd3047a04395")
ALIGN_HASH = bytes.fromhex("ffb987f6d9bb2fd34b4936c9086e280208ec2ab94322eb39081763e18788cd18")
MAGIC = b"epserde "

LOG2_ONES_PER_INVENTORY = 11
LOG2_WORDS_PER_SUBINVENTORY = 3
ONES_PER_INVENTORY = 1 << LOG2_ONES_PER_INVENTORY
WORDS_PER_SUBINVENTORY = 1 << LOG2_WORDS_PER_SUBINVENTORY
WORDS_PER_INVENTORY = WORDS_PER_SUBINVENTORY + 1
# One u16 offset every 2**6 ones: 32 of them fill the 8-word sub-inventory.
LOG2_ONES_PER_SUB16 = max(0, LOG2_ONES_PER_INVENTORY - (LOG2_WORDS_PER_SUBINVENTORY + 2))
U32_FLAG = np.uint64(1 << 63)
U64_FLAG = np.uint64(3 << 62)


# ---- the Elias–Fano parts --------------------------------------------------------------------


def ef_parts(values: np.ndarray, u: int) -> tuple[int, np.ndarray, np.ndarray, int, np.ndarray]:
    """``(lw, low_words, high_words, high_len, one_positions)`` of sux's Elias–Fano
    representation of the nondecreasing ``values``, all at most the upper bound ``u``: ``lw``
    low bits per value, and the high-bits vector of ``high_len`` bits with its ones' positions."""
    v = np.ascontiguousarray(values, dtype=np.uint64)
    n = len(v)
    # sux: lw = floor(log2(u / n)) when u >= n; the integer form avoids float rounding.
    lw = (u // n).bit_length() - 1 if n and u >= n else 0
    # Low bits: n fields of lw bits, field i at bits [i*lw, (i+1)*lw) of the little-endian words,
    # plus the padding word try_into_unaligned() adds for 8-byte unaligned reads.
    needed = (n * lw + 63) // 64
    low = np.zeros(needed + 1, dtype=np.uint64)
    if lw:
        lowv = v & np.uint64((1 << lw) - 1)
        start = np.arange(n, dtype=np.uint64) * np.uint64(lw)
        w = (start >> np.uint64(6)).astype(np.int64)
        off = start & np.uint64(63)
        np.bitwise_or.at(low, w, lowv << off)
        # Fields straddling a word boundary spill their top bits into the next word.
        cross = (off + np.uint64(lw)) > np.uint64(64)
        if cross.any():
            np.bitwise_or.at(low, w[cross] + 1, lowv[cross] >> (np.uint64(64) - off[cross]))
    # High bits: value i sets bit (v_i >> lw) + i of a vector of n + (u >> lw) + 1 bits.
    high_len = n + (u >> lw) + 1
    pos = (v >> np.uint64(lw)) + np.arange(n, dtype=np.uint64)
    high = np.zeros((high_len + 63) // 64, dtype=np.uint64)
    np.bitwise_or.at(high, (pos >> np.uint64(6)).astype(np.int64),
                     np.uint64(1) << (pos & np.uint64(63)))
    return lw, low, high, high_len, pos.astype(np.int64)


def select_inventory(pos: np.ndarray, num_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``(inventory, spill)`` of ``SelectAdaptConst<_, _, 11, 3>`` over a bit vector of
    ``num_bits`` bits whose ones are at the increasing positions ``pos`` (see the module doc)."""
    num_ones = len(pos)
    num_bits = max(1, num_bits)
    blocks = -(-num_ones // ONES_PER_INVENTORY)
    inv = np.zeros(blocks * WORDS_PER_INVENTORY + 1, dtype=np.uint64)
    starts = pos[::ONES_PER_INVENTORY].astype(np.int64)
    ends = np.append(starts[1:], num_bits)
    spans = ends - starts
    inv[0 : blocks * WORDS_PER_INVENTORY : WORDS_PER_INVENTORY] = starts.astype(np.uint64)
    inv[-1] = num_bits
    # Sub-inventory entry j of a block is the (j << q)-th one of the block, if it exists.
    u16 = inv[: blocks * WORDS_PER_INVENTORY].view(np.uint16).reshape(blocks, 4 * WORDS_PER_INVENTORY)
    quanta16 = np.arange(1, ONES_PER_INVENTORY >> LOG2_ONES_PER_SUB16) << LOG2_ONES_PER_SUB16
    dense = np.nonzero(spans <= 0x10000)[0]
    if len(dense):
        # The common case, vectorized: offsets of ones 64, 128, ... from the block start.
        idx = dense[:, None] * ONES_PER_INVENTORY + quanta16[None, :]
        ok = idx < num_ones
        offs = np.where(ok, pos[np.minimum(idx, num_ones - 1)] - starts[dense][:, None], 0)
        u16[dense, 5:4 + (ONES_PER_INVENTORY >> LOG2_ONES_PER_SUB16)] = offs.astype(np.uint16)
    spill: list[np.uint64] = []
    for b in np.nonzero(spans > 0x10000)[0]:
        # Sparse blocks (huge gaps between offsets) are rare: a plain loop.
        b = int(b)
        base = b * WORDS_PER_INVENTORY
        first = b * ONES_PER_INVENTORY
        ones = min(num_ones - first, ONES_PER_INVENTORY)
        start, span = int(starts[b]), int(spans[b])
        inv[base + 1] = len(spill)
        if span <= 1 << 32:
            inv[base] |= U32_FLAG
            # Denser sampling the longer the span: q = 6 - (floor(log2(span >> 15)) + 1).
            q = max(0, LOG2_ONES_PER_SUB16 - (span >> 15).bit_length())
            offs = np.zeros(-(-ones >> q), dtype=np.uint32)  # entry 0 (the start) stays 0
            offs[1:] = pos[first + (np.arange(1, len(offs)) << q)] - start
            local = inv[base + 2 : base + WORDS_PER_INVENTORY].view(np.uint32)
            local[: min(len(local), len(offs))] = offs[: len(local)]
            extra = offs[len(local) :]
            if len(extra):
                # Spilled u32 pairs, packed in words (the last one zero-padded).
                spill.extend(np.append(extra, np.zeros(len(extra) & 1, np.uint32)).view(np.uint64))
        else:
            inv[base] |= U64_FLAG
            # Every one's position: ones 1-7 in place, the others in the spill.
            rest = pos[first + 1 : first + ones].astype(np.uint64)
            inv[base + 2 : base + 2 + min(7, len(rest))] = rest[:7]
            spill.extend(rest[7:])
    return inv, np.array(spill, dtype=np.uint64)


# ---- ε-serde ---------------------------------------------------------------------------------


class _Writer:
    """Appends ε-serde fields, tracking the file offset that slice alignment is relative to."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.pos = 0

    def raw(self, b: bytes) -> None:
        self.parts.append(b)
        self.pos += len(b)

    def usize(self, x: int) -> None:
        self.raw(struct.pack("<Q", x))

    def slice64(self, words: np.ndarray) -> None:
        # Box<[usize]>/Box<[u64]>: the length, then zero padding to 8 bytes, then the data.
        self.usize(len(words))
        self.raw(b"\0" * (-self.pos % 8))
        self.raw(np.ascontiguousarray(words, dtype="<u8").tobytes())


def ef_bytes(offsets: np.ndarray, upper_bound: int) -> bytes:
    """The ``.ef`` file image for the ``n + 1`` bit offsets ``offsets`` (``offsets[0] == 0``)
    of a graph whose ``.graph`` file has ``upper_bound`` bits."""
    offsets = np.asarray(offsets)
    if len(offsets) and (np.any(np.diff(offsets.astype(np.int64)) < 0) or offsets[-1] > upper_bound):
        raise ValueError("offsets must be nondecreasing and at most the upper bound")
    n = len(offsets)
    lw, low, high, high_len, pos = ef_parts(offsets, upper_bound)
    inventory, spill = select_inventory(pos, high_len)
    w = _Writer()
    w.raw(MAGIC + struct.pack("<HHB", *EPSERDE_VERSION, 8) + TYPE_HASH + ALIGN_HASH)
    name = TYPE_NAME.encode()
    w.raw(struct.pack("<Q", len(name)))  # the header's string length is not aligned
    w.raw(name)
    w.usize(n)
    w.usize(upper_bound)
    w.usize(lw)
    # sux 0.15 caches the first and last value (for O(1) bounds in successor/predecessor).
    w.usize(int(offsets[0]) if n else 0)  # first_val
    w.usize(int(offsets[-1]) if n else 0)  # last_val
    w.slice64(low)  # low_bits.0.bits
    w.usize(lw)  # bit_width
    w.usize((1 << lw) - 1)  # mask
    w.usize(n)  # len
    w.slice64(high)  # high_bits.bits.bits
    w.usize(high_len)  # high_bits.bits.len
    w.slice64(inventory)
    w.slice64(spill)
    return b"".join(w.parts)


def graph_offsets(basename: str | Path) -> tuple[np.ndarray, int]:
    """The ``n + 1`` record offsets of a stored BV graph (from its ``.offsets``) and the bit
    length of its ``.graph`` file (webgraph's upper bound)."""
    basename = str(basename)
    n = int(read_properties(basename + ".properties")["nodes"])
    gaps, _ = read_gamma_sequence(words_from_bytes(Path(basename + ".offsets").read_bytes()), n + 1)
    return np.cumsum(gaps), 8 * Path(basename + ".graph").stat().st_size


def write_ef(basename: str | Path, offsets: np.ndarray | None = None) -> Path:
    """Write ``basename.ef`` for the BV graph ``basename`` and return its path.

    ``offsets`` (the ``n + 1`` record offsets) saves re-reading ``basename.offsets`` when the
    caller has just computed them."""
    basename = str(basename)
    graph_bits = 8 * Path(basename + ".graph").stat().st_size
    if offsets is None:
        offsets, graph_bits = graph_offsets(basename)
    path = Path(basename + ".ef")
    path.write_bytes(ef_bytes(offsets, graph_bits))
    return path
