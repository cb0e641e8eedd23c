"""Winnowing (Schleimer, Wilkerson, Aiken), as seed 004 §2 adapts it to pages: each *word* is hashed
to one byte, and winnowing runs over that byte array so every cut falls on a word boundary.

Phase 1 hashes each run of ``b`` consecutive word-bytes to a 64-bit value ``h[i]``; phase 2 slides a
window of ``w`` hashes and cuts before the position of the window's minimum (the rightmost one on
ties, and no new cut when a tied minimum was already cut before — the paper's rules (a)/(b)).
Fragments then have at most ``w`` words, ``(w+1)/2`` on average for random hashes, and two texts
sharing a run of ≥ ``w + b + 1`` words share at least one fragment.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import xxhash

DEFAULT_B = 5
DEFAULT_W = 100
_M = (1 << 64) - 1
_word_byte_cache: dict[str, int] = {}


def word_bytes(words: list[str]) -> np.ndarray:
    """One byte per word (low byte of xxh3-64), the paper's "hash each word to an unsigned char"."""
    cache = _word_byte_cache
    out = np.empty(len(words), dtype=np.uint8)
    for i, w in enumerate(words):
        v = cache.get(w)
        if v is None:
            v = cache[w] = xxhash.xxh3_64_intdigest(w.encode()) & 0xFF
        out[i] = v
    return out


def gram_hashes(f: np.ndarray, b: int) -> list[int]:
    """h[i] = H(f[i … i+b-1]) for i in 0 … n-b (one value when n < b: the whole array)."""
    data = f.tobytes()
    n = max(1, len(data) - b + 1)
    return [xxhash.xxh3_64_intdigest(data[i: i + b]) for i in range(n)]


def winnow_cuts(f: np.ndarray, b: int = DEFAULT_B, w: int = DEFAULT_W) -> list[int]:
    """Sorted cut positions (word indices, 0 < cut < len(f)): fragment k is f[cuts[k-1]:cuts[k]]."""
    if b < 1 or w < 1:
        raise ValueError("winnowing needs b >= 1 and w >= 1")
    n = len(f)
    if n <= 1:
        return []
    h = gram_hashes(f, b)
    cuts: list[int] = []
    last_cut = -1
    dq: deque[int] = deque()  # indices of increasing h; the front is the window's rightmost minimum
    for j in range(len(h)):
        v = h[j]
        while dq and h[dq[-1]] >= v:
            dq.pop()
        dq.append(j)
        start = j - w + 1
        if dq[0] < start:
            dq.popleft()
        if start < 0 and j != len(h) - 1:
            continue  # the first full window (or the whole array when shorter than w)
        m = dq[0]
        # Rule (b): a tied minimum already cut before means no new cut in this window. Checking the
        # last cut suffices: any earlier cut still in the window was in the window that chose the
        # last cut, so the last cut's value is ≤ it, hence also the minimum.
        if last_cut >= max(start, 0) and h[last_cut] == h[m]:
            continue
        if m != last_cut:
            last_cut = m
            if 0 < m < n:
                cuts.append(m)
    return cuts


def fragments(words: list[str], b: int = DEFAULT_B, w: int = DEFAULT_W) -> list[list[str]]:
    """The words cut into fragments (concatenated they give ``words`` back)."""
    if not words:
        return []
    bounds = [0, *winnow_cuts(word_bytes(words), b, w), len(words)]
    return [words[s:e] for s, e in zip(bounds, bounds[1:], strict=False) if e > s]


def fragment_hash(words: list[str]) -> int:
    """64-bit content identity of a fragment (xxh3-64 of its words, NUL-separated), as a signed int64."""
    v = xxhash.xxh3_64_intdigest("\0".join(words).encode())
    return v - (1 << 64) if v >= 1 << 63 else v
