"""Seed 002's own URL ↔ identifier scheme, beside raycrawl's front-coded map (storage/urlmap.py).

Guillaume, Latapy & Viennot, "Efficient and simple encodings for the Web graph", §2: the URLs are
sorted lexicographically and a URL's identifier is its position in that order; the sorted list is
cut into blocks of ``block_size`` URLs, each block gzipped on its own, and the first URL of each
block is kept (§2.1, "gzipped blocks"):

* URL → id: binary search of the first URLs for the block (O(log blocks)), inflate the block
  (O(block)), then a linear search in it (O(block)) — Table 2;
* id → URL: block ``id // block_size``, inflate it, take line ``id mod block_size`` (linear, since
  lines differ in length) — Table 2.

With ``fixed_length`` (§2.2, Table 3) every URL of a block is padded with a filler byte to the
length of the block's longest, so the search in an inflated block is a binary search and id → URL a
slice: O(log block) and O(1) for the third step, paid for in padding.

raycrawl's own map orders URLs by reversed host (storage/urlmap.py) and front-codes its blocks;
this module exists to measure the paper's scheme on the same URL lists (benchmarks/graph.py).
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Iterable

FILLER = b"\x00"  # cannot occur in a URL


class GzipBlockUrls:
    """Sorted URLs in independently compressed blocks of ``block_size``, with the first-URL index."""

    def __init__(self, urls: Iterable[str], block_size: int = 1000, fixed_length: bool = False,
                 level: int = 6) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, not {block_size}")
        ordered = sorted({u.encode() for u in urls})
        self.block_size, self.fixed_length, self.n = block_size, fixed_length, len(ordered)
        self.first: list[bytes] = []
        self.widths: list[int] = []  # per block: the padded length (fixed_length only)
        self.blocks: list[bytes] = []
        for start in range(0, len(ordered), block_size):
            block = ordered[start:start + block_size]
            self.first.append(block[0])
            if fixed_length:
                width = max(map(len, block))
                self.widths.append(width)
                raw = b"".join(u.ljust(width, FILLER) for u in block)
            else:
                raw = b"\n".join(block)
            self.blocks.append(zlib.compress(raw, level))  # gzip's DEFLATE, without its 18-byte header

    @property
    def blocks_bytes(self) -> int:
        return sum(map(len, self.blocks))

    @property
    def index_bytes(self) -> int:
        """The first-URL index: each first URL, a newline, and an 8-byte block offset."""
        return sum(len(u) + 1 + 8 for u in self.first) + 4 * len(self.widths)

    @property
    def size_bytes(self) -> int:
        return self.blocks_bytes + self.index_bytes

    def _block(self, b: int) -> bytes:
        return zlib.decompress(self.blocks[b])

    def id_of(self, url: str) -> int | None:
        key = url.encode()
        b = bisect.bisect_right(self.first, key) - 1
        if b < 0:
            return None
        raw = self._block(b)
        if self.fixed_length:
            width = self.widths[b]
            count = len(raw) // width
            lo, hi = 0, count
            while lo < hi:  # binary search over the padded slots
                mid = (lo + hi) // 2
                if raw[mid * width:(mid + 1) * width].rstrip(FILLER) < key:
                    lo = mid + 1
                else:
                    hi = mid
            found = lo < count and raw[lo * width:(lo + 1) * width].rstrip(FILLER) == key
            return b * self.block_size + lo if found else None
        for i, line in enumerate(raw.split(b"\n")):  # the paper's linear search
            if line == key:
                return b * self.block_size + i
        return None

    def url_of(self, ident: int) -> str:
        if not 0 <= ident < self.n:
            raise IndexError(ident)
        b, i = divmod(ident, self.block_size)
        raw = self._block(b)
        if self.fixed_length:
            width = self.widths[b]
            return raw[i * width:(i + 1) * width].rstrip(FILLER).decode()
        return raw.split(b"\n")[i].decode()
