"""The graph encodings of Guillaume, Latapy and Viennot (seed 002, §3, Table 4), for comparison
with BV on the same graph. Each encoding is built from CSR arrays and offers ``successors(v)``
and ``nbytes`` (the size of the encoded links, without the per-node/per-block index, as the
paper counts it — and as WebGraph's bits/link excludes the ``.offsets`` file).

* ``reference_sizes``: the table's reference lines — identifiers (8 bytes/link), the text file
  of successor ids (line k = successors of k), the text of distances, and each gzipped whole
  (no random access at all).
* ``GzipBlocks``: the text file cut into blocks of ``lines`` lines, each deflated on its own;
  a lookup inflates one block and parses one line (§3.1).
* ``ShortMediumLong``: each successor as its signed distance ``d = succ - v`` to the node
  (§3.3): *short* ``|d| ≤ 255`` on prefix + sign + 1 byte, *medium* ``|d| < 2**16`` on
  prefix + sign + 2 bytes, *long* on prefix + sign + the bytes a node id needs (3 for the paper's
  8M nodes). Prefixes ``0``/``1`` (short, long) or ``0``/``10``/``11`` (short, medium, long).
  With ``huffman=True`` the short links (sign included) are Huffman-coded instead — the long
  ones are not, as the paper found best. Each node's list starts with its γ-coded outdegree;
  an offsets array (in memory) gives random access.
"""

from __future__ import annotations

import heapq
import zlib
from dataclasses import dataclass

import numpy as np
from numba import njit

from raycrawl.storage.codes import PAD_WORDS, read_bits, read_gamma, write_bits, write_gamma


def _lines(indptr: np.ndarray, values: np.ndarray) -> list[bytes]:
    n = len(indptr) - 1
    vals = values.tolist()
    return [" ".join(map(str, vals[indptr[v] : indptr[v + 1]])).encode() for v in range(n)]


def reference_sizes(indptr: np.ndarray, indices: np.ndarray) -> dict[str, float]:
    """Bytes per link of the paper's reference encodings (Table 4, first four lines)."""
    m = max(1, int(indptr[-1]))
    n = len(indptr) - 1
    ids = b"\n".join(_lines(indptr, indices)) + b"\n"
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dist = b"\n".join(_lines(indptr, indices.astype(np.int64) - src)) + b"\n"
    return {
        "identifiers": 8.0,
        "text identifiers": len(ids) / m,
        "gzipped identifiers": len(zlib.compress(ids, 9)) / m,
        "text distances": len(dist) / m,
        "gzipped distances": len(zlib.compress(dist, 9)) / m,
    }


class GzipBlocks:
    """Successor lists as text lines, deflated in blocks of ``lines`` lines (§3.1)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, lines: int = 32) -> None:
        assert lines >= 1
        self.lines = lines
        self.num_nodes = len(indptr) - 1
        text = _lines(indptr, indices)
        self._blocks = [zlib.compress(b"\n".join(text[b : b + lines]), 9)
                        for b in range(0, self.num_nodes, lines)]
        self.nbytes = sum(map(len, self._blocks))

    def successors(self, v: int) -> np.ndarray:
        b, j = divmod(v, self.lines)
        line = zlib.decompress(self._blocks[b]).split(b"\n")[j]
        return np.array(line.split(), dtype=np.int64)


# ---- short / medium / long links --------------------------------------------------------------

SHORT_MAX = 255
MEDIUM_MAX = (1 << 16) - 1


def huffman_lengths(freq: np.ndarray) -> np.ndarray:
    """Code length of each symbol of a Huffman code for ``freq`` (0 for absent symbols)."""
    lengths = np.zeros(len(freq), dtype=np.int64)
    heap = [(int(f), i, (i,)) for i, f in enumerate(freq) if f > 0]
    if len(heap) == 1:
        lengths[heap[0][1]] = 1
        return lengths
    heapq.heapify(heap)
    tie = len(freq)
    while len(heap) > 1:
        f1, _, s1 = heapq.heappop(heap)
        f2, _, s2 = heapq.heappop(heap)
        for s in s1 + s2:
            lengths[s] += 1
        heapq.heappush(heap, (f1 + f2, tie, s1 + s2))
        tie += 1
    return lengths


def canonical_codes(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Canonical codes for ``lengths``: ``(code per symbol, first code per length, index of the
    first symbol of each length in ``symbols``, symbols sorted by (length, symbol))``."""
    maxlen = int(lengths.max()) if len(lengths) and lengths.max() > 0 else 1
    symbols = np.array(sorted((i for i in range(len(lengths)) if lengths[i] > 0), key=lambda i: (lengths[i], i)),
                       dtype=np.int64)
    codes = np.zeros(len(lengths), dtype=np.int64)
    first = np.zeros(maxlen + 2, dtype=np.int64)
    start = np.zeros(maxlen + 2, dtype=np.int64)
    count = np.bincount(lengths[lengths > 0], minlength=maxlen + 2)
    code = 0
    idx = 0
    for ln in range(1, maxlen + 1):
        first[ln] = code
        start[ln] = idx
        for _ in range(count[ln]):
            codes[symbols[idx]] = code
            code += 1
            idx += 1
        code <<= 1
    start[maxlen + 1] = idx
    return codes, first, start, symbols


@njit(cache=True)
def _sml_write(buf, pos, d, mode, long_bits, hcode, hlen):
    neg = 1 if d < 0 else 0
    a = -d if d < 0 else d
    if a <= SHORT_MAX:
        pos = write_bits(buf, pos, 0, 1)
        if mode == 2:
            s = d + SHORT_MAX
            return write_bits(buf, pos, hcode[s], hlen[s])
        pos = write_bits(buf, pos, neg, 1)
        return write_bits(buf, pos, a, 8)
    if mode == 0:
        pos = write_bits(buf, pos, 1, 1)
    elif a <= MEDIUM_MAX:
        pos = write_bits(buf, pos, 2, 2)
        pos = write_bits(buf, pos, neg, 1)
        return write_bits(buf, pos, a, 16)
    else:
        pos = write_bits(buf, pos, 3, 2)
    pos = write_bits(buf, pos, neg, 1)
    return write_bits(buf, pos, a, long_bits)


@njit(cache=True)
def _sml_encode(indptr, indices, mode, long_bits, hcode, hlen):
    n = indptr.shape[0] - 1
    empty = np.zeros(0, dtype=np.uint64)
    total = np.int64(0)
    for v in range(n):
        total = write_gamma(empty, total, indptr[v + 1] - indptr[v])
        for k in range(indptr[v], indptr[v + 1]):
            total = _sml_write(empty, total, indices[k] - v, mode, long_bits, hcode, hlen)
    buf = np.zeros(total // 64 + PAD_WORDS, dtype=np.uint64)
    offsets = np.empty(n + 1, dtype=np.int64)
    pos = np.int64(0)
    for v in range(n):
        offsets[v] = pos
        pos = write_gamma(buf, pos, indptr[v + 1] - indptr[v])
        for k in range(indptr[v], indptr[v + 1]):
            pos = _sml_write(buf, pos, indices[k] - v, mode, long_bits, hcode, hlen)
    offsets[n] = pos
    return buf, offsets


@njit(cache=True)
def _sml_decode(words, pos, v, mode, long_bits, hfirst, hstart, hsyms, hmax):
    d, pos = read_gamma(words, pos)
    out = np.empty(d, dtype=np.int64)
    for i in range(d):
        t, pos = read_bits(words, pos, 1)
        if t == 0:
            if mode == 2:
                code = 0
                ln = 0
                while True:
                    b, pos = read_bits(words, pos, 1)
                    code = (code << 1) | b
                    ln += 1
                    if ln > hmax:
                        raise ValueError("corrupt Huffman code")
                    cnt = hstart[ln + 1] - hstart[ln]
                    if code - hfirst[ln] < cnt:
                        out[i] = v + hsyms[hstart[ln] + code - hfirst[ln]] - SHORT_MAX
                        break
                continue
            nbits = 8
        elif mode == 0:
            nbits = long_bits
        else:
            t2, pos = read_bits(words, pos, 1)
            nbits = 16 if t2 == 0 else long_bits
        neg, pos = read_bits(words, pos, 1)
        a, pos = read_bits(words, pos, nbits)
        out[i] = v - a if neg else v + a
    return out


@dataclass
class _Huffman:
    code: np.ndarray
    length: np.ndarray
    first: np.ndarray
    start: np.ndarray
    symbols: np.ndarray


class ShortMediumLong:
    """Distances on short/(medium)/long links, optionally Huffman-coded short links (§3.3)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, medium: bool = True, huffman: bool = False) -> None:
        assert medium or not huffman, "the paper's Huffman variant has medium links"
        self.num_nodes = n = len(indptr) - 1
        self.mode = 2 if huffman else 1 if medium else 0
        # Long links take the whole bytes a node id needs (3 bytes for the paper's 8M nodes).
        self.long_bits = 8 * max(1, -(-int(max(n - 1, 1)).bit_length() // 8))
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        size = 2 * SHORT_MAX + 1
        if huffman:
            src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
            d = indices - src
            short = d[np.abs(d) <= SHORT_MAX] + SHORT_MAX
            lengths = huffman_lengths(np.bincount(short, minlength=size))
            code, first, start, symbols = canonical_codes(lengths)
            self._h = _Huffman(code, lengths, first, start, symbols)
        else:
            z = np.zeros(size, dtype=np.int64)
            self._h = _Huffman(z, z, np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64), z)
        self._words, self._offsets = _sml_encode(indptr, indices, self.mode, self.long_bits, self._h.code,
                                                 self._h.length)
        self.nbits = int(self._offsets[-1])
        self.nbytes = self.nbits / 8
        self._hmax = len(self._h.first) - 2

    def successors(self, v: int) -> np.ndarray:
        h = self._h
        return _sml_decode(self._words, self._offsets[v], v, self.mode, self.long_bits, h.first, h.start,
                           h.symbols, self._hmax)
