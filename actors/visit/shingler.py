"""The shingler: near-duplicate detection by word shingles, MinHash sketches and LSH bands.

Seed 001 (Broder et al., "Syntactic clustering of the web"): a document is the *set* of its
k-shingles (k consecutive words, k = 4); the similarity of two documents is the Jaccard
coefficient of their shingle sets; a MinHash sketch of ``num_perm`` minima under random
permutations estimates it (the fraction of equal sketch components). Candidate pairs come from
LSH banding — the sketch is cut into ``bands`` bands of ``num_perm / bands`` rows and two
documents are candidates when a whole band agrees (the "super-shingle" of that band) — and a
candidate is confirmed only when its *estimated* Jaccard is ≥ ``threshold``.

Text goes through the one text pipeline (``raycrawl.text.tokens`` of the visible text: the same
lower-cased tokens whose join is ``normalized_text``, on which the exact-duplicate digest is
computed). Each token is hashed with xxh3-64; a shingle's 64-bit hash is the fmix64 finaliser
of the polynomial of its k token hashes (vectorised in numpy — hashing the joined shingle
strings one by one costs twice as much). Sketches are computed by rensa (Rust) from those
pre-hashed shingles: see benchmarks/dedup.py for the comparison with datasketch and with a
numpy MinHash of our own.

:class:`NearDupIndex` is the crawl-time index (plain class over a sketch store: in memory, or the
crawl's duplicate stores on the agents' disks, actors/visit/duplicates.py); the agent calls it in its own
process, once per batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import xxhash

from raycrawl.settings import Settings
from raycrawl.storage.sketch_store import MemorySketchStore, rep_id
from raycrawl.text import tokens

log = logging.getLogger(__name__)

DEFAULT_NUM_PERM = 128  # sketches for candidate generation (post-crawl confirms with exact Jaccard)
DEFAULT_BANDS = 16
DEFAULT_ROWS = 8  # 16 bands × 8 rows: candidate probability 0.9998 at J = 0.9, 0.9993 at J = 0.88
# Crawl time decides on the estimate alone, so it needs a sharper one within the same memory:
# 512 permutations kept as 8-bit values (b-bit MinHash, Li & König) = 512 bytes, the size of 128
# full 32-bit values, with half their variance (websim mirrors sit just above J = 0.9).
CRAWL_NUM_PERM = 512
CRAWL_SKETCH_BITS = 8
DEFAULT_THRESHOLD = 0.9
DEFAULT_K = 4
# Written into the stored index: a change here must not silently mix old and new sketches.
HASH_SCHEME = "xxh3_64-tokens/poly-fmix64-shingles/rensa-rminhash-u32"

_POLY = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_EMPTY = np.zeros(0, dtype=np.uint64)


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: every input bit affects every output bit."""
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


def shingle_hashes_of_tokens(words: Sequence[str], k: int = DEFAULT_K) -> np.ndarray:
    """64-bit hashes of the word k-shingles of ``words`` (uint64, one per position, repeats kept).

    A text shorter than ``k`` words is one shingle (all its words); an empty text has none.
    """
    assert k >= 1
    if not words:
        return _EMPTY
    h = np.fromiter(
        (xxhash.xxh3_64_intdigest(w.encode("utf-8")) for w in words), dtype=np.uint64, count=len(words)
    )
    n = max(len(h) - k + 1, 1)
    kk = min(k, len(h))
    with np.errstate(over="ignore"):
        s = h[:n].copy()
        for j in range(1, kk):
            s = s * _POLY + h[j : j + n]
        # Mix in the shingle length so a 2-word page never collides with a 4-shingle.
        s = s * _POLY + np.uint64(kk)
        return _fmix64(s)


def shingle_hashes(text: str, k: int = DEFAULT_K) -> np.ndarray:
    """Shingle hashes of a (visible, not HTML) text, tokenised by ``raycrawl.text.tokens``."""
    return shingle_hashes_of_tokens(tokens(text), k)


def shingle_set(text: str, k: int = DEFAULT_K) -> set[int]:
    """The shingle set S(d) of seed 001, as 64-bit hashes (for exact Jaccard)."""
    return set(shingle_hashes(text, k).tolist())


def exact_jaccard(a: set[int], b: set[int]) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def sketch_matrix(shingles: Sequence[np.ndarray], num_perm: int = DEFAULT_NUM_PERM, seed: int = 1) -> np.ndarray:
    """MinHash sketches (uint32, shape ``(len(shingles), num_perm)``) of pre-hashed shingle arrays.

    An empty shingle array gives a row of 0xFFFFFFFF (callers skip empty documents).
    """
    import rensa

    if not shingles:
        return np.zeros((0, num_perm), dtype=np.uint32)
    lengths = np.fromiter((len(s) for s in shingles), dtype=np.uint64, count=len(shingles))
    offsets = np.zeros(len(shingles) + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(shingles) if int(offsets[-1]) else _EMPTY
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(flat, offsets, num_perm, seed)
    out = np.asarray(matrix.to_rows(), dtype=np.uint32)
    assert out.shape == (len(shingles), num_perm)
    return out


def sketch_texts(texts: Sequence[str], num_perm: int = DEFAULT_NUM_PERM, k: int = DEFAULT_K, seed: int = 1):
    """(sketches, non-empty mask) of visible texts."""
    return sketch_token_lists([tokens(t) for t in texts], num_perm, k, seed)


def sketch_token_lists(token_lists: Sequence[Sequence[str]], num_perm: int = DEFAULT_NUM_PERM, k: int = DEFAULT_K,
                       seed: int = 1):
    """:func:`sketch_texts` of texts tokenised already (``raycrawl.text.tokens``)."""
    sh = [shingle_hashes_of_tokens(words, k) for words in token_lists]
    return sketch_matrix(sh, num_perm, seed), np.array([len(s) > 0 for s in sh], dtype=bool)


def band_keys(sketches: np.ndarray, bands: int, rows: int | None = None) -> np.ndarray:
    """LSH band keys, shape ``(n, bands)`` uint64: a 64-bit hash of each band and its index.

    Band ``j`` is sketch columns ``j·rows … (j+1)·rows − 1`` (the first ``bands·rows`` columns;
    ``rows`` defaults to all of them). Two sketches share key ``j`` exactly when their band ``j``
    agrees (up to 2^-64 collisions).
    """
    n, num_perm = sketches.shape
    rows = rows or num_perm // bands
    assert bands >= 1 and rows >= 1 and bands * rows <= num_perm, "bands × rows must be ≤ num_perm"
    b = sketches[:, : bands * rows].reshape(n, bands, rows).astype(np.uint64)
    with np.errstate(over="ignore"):
        acc = np.broadcast_to(np.arange(1, bands + 1, dtype=np.uint64), (n, bands)).copy()
        for r in range(rows):
            acc = acc * _POLY + b[:, :, r]
        return _fmix64(acc)


def estimated_jaccard(a: np.ndarray, b: np.ndarray, bits: int = 32) -> float:
    """Fraction of equal sketch components: an unbiased estimate of the Jaccard coefficient.

    For sketches truncated to ``bits`` low bits (b-bit MinHash), two different minima still agree
    with probability c = 2^-bits; the estimate is corrected to (p − c) / (1 − c).
    """
    assert a.shape == b.shape
    p = float(np.count_nonzero(a == b)) / a.shape[-1]
    if bits >= 32:
        return p
    c = 2.0**-bits
    return max(0.0, (p - c) / (1 - c))


def truncate_sketches(sketches: np.ndarray, bits: int) -> np.ndarray:
    """Keep the low ``bits`` (8, 16 or 32) of each MinHash value: the compact stored sketch."""
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    return (sketches & np.uint32((1 << bits) - 1)).astype(dtype) if bits < 32 else sketches


def near_dup_meta(num_perm: int = CRAWL_NUM_PERM, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS,
                  sketch_bits: int = CRAWL_SKETCH_BITS, k: int = DEFAULT_K, seed: int = 1) -> dict[str, str]:
    """The parameters a stored index is built with: written with it, so that a store built with
    others is refused instead of silently mixing sketches (storage/dedup_store.py)."""
    meta = {"num_perm": num_perm, "bands": bands, "rows": rows, "bits": sketch_bits, "k": k, "seed": seed,
            "hash": HASH_SCHEME}
    return {key: str(v) for key, v in meta.items()}


def sketch_dtype(sketch_bits: int) -> str:
    return {8: "<u1", 16: "<u2", 32: "<u4"}[sketch_bits]


class NearDupIndex:
    """Crawl-time near-duplicate index over cluster representatives.

    State lives in ``store`` (storage/sketch_store.py's contract): the crawl's duplicate stores,
    sharded on the agents' disks and surviving restarts (actors/visit/duplicates.py), or memory (the
    default). Only representatives are stored: a near-duplicate is reported, not added.

    With several agents, two near-duplicate pages checked at the same instant by different agents
    may both become representatives (a missed suppression, never a wrong one).
    """

    def __init__(
        self,
        store: object | None = None,
        num_perm: int = CRAWL_NUM_PERM,
        bands: int = DEFAULT_BANDS,
        threshold: float = DEFAULT_THRESHOLD,
        k: int = DEFAULT_K,
        seed: int = 1,
        rows: int = DEFAULT_ROWS,
        sketch_bits: int = CRAWL_SKETCH_BITS,
        flush_reps: int = 1,
        flush_seconds: float = 0.0,
    ) -> None:
        """``flush_reps``/``flush_seconds``: new representatives are written to ``store`` once that
        many wait or that long passed (meanwhile they are matched from memory). A crash loses the
        unwritten ones: later near-copies of those pages are then archived in full, never wrongly
        marked. The crawl writes every 1,024 or 2 s: one write per shard per batch cost more than
        the rest of the index (benchmarks/RESULTS.md, issue 28)."""
        if num_perm < 1 or bands < 1 or rows < 1 or bands * rows > num_perm:
            raise ValueError(f"bands × rows ({bands} × {rows}) must be ≤ num_perm ({num_perm})")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], not {threshold}")
        if k < 1:
            raise ValueError(f"k must be ≥ 1, not {k}")
        if sketch_bits not in (8, 16, 32):
            raise ValueError(f"sketch_bits must be 8, 16 or 32, not {sketch_bits}")
        self.num_perm, self.bands, self.rows, self.threshold = num_perm, bands, rows, threshold
        self.k, self.seed, self.sketch_bits = k, seed, sketch_bits
        self.store = store if store is not None else MemorySketchStore(sketch_dtype(sketch_bits))
        self.flush_reps, self.flush_seconds = flush_reps, flush_seconds
        self.pending: list[tuple[str, np.ndarray, list[int]]] = []  # new representatives: (url, sketch, keys)
        self.pending_band: dict[int, int] = {}  # their band keys → index into pending
        self.flushed_at = time.monotonic()
        self.checked = 0
        self.near_duplicates = 0

    def check_and_add(self, docs: list[tuple[str, str]]) -> list[str | None]:
        """For each (canonical URL, visible text), in order: the representative URL of the
        cluster the page near-duplicates (estimated Jaccard ≥ threshold with a stored
        representative, or with an earlier page of the same batch), else None — and the page
        becomes a representative. A page with no words is neither matched nor stored (None).
        Checking a representative's own URL again returns None, not itself.
        """
        if not docs:
            return []
        sketches, nonempty = sketch_texts([t for _, t in docs], self.num_perm, self.k, self.seed)
        return self.check_and_add_sketches([u for u, _ in docs], sketches, nonempty)

    def check_and_add_sketches(
        self, urls: list[str], sketches: np.ndarray, nonempty: np.ndarray | None = None
    ) -> list[str | None]:
        """:meth:`check_and_add` for sketches already computed (by :func:`sketch_texts` with
        this index's ``num_perm``, ``k`` and ``seed``); rows where ``nonempty`` is False are
        pages without words."""
        assert sketches.shape == (len(urls), self.num_perm)
        if nonempty is None:
            nonempty = np.ones(len(urls), dtype=bool)
        key_ints = band_keys(sketches, self.bands, self.rows).tolist()
        sketches = truncate_sketches(sketches, self.sketch_bits)
        # One round trip for every band key of the batch, one for the candidates' sketches.
        found = self.store.lookup_bands([k for i, row in enumerate(key_ints) if nonempty[i] for k in row])
        cand_ids = [{found[k] for k in row if k in found} if nonempty[i] else set() for i, row in enumerate(key_ints)]
        stored = self.store.representatives(set().union(*cand_ids))

        results: list[str | None] = []
        new_reps, local_band = self.pending, self.pending_band
        for i, url in enumerate(urls):
            if not nonempty[i]:
                results.append(None)
                continue
            sk = sketches[i]
            best: tuple[float, str] | None = None
            cands = [stored[c] for c in sorted(cand_ids[i]) if c in stored]
            local = {local_band[kb] for kb in key_ints[i] if kb in local_band}
            cands += [(new_reps[j][1], new_reps[j][0]) for j in sorted(local)]
            for rep_sketch, rep_url in cands:
                j = estimated_jaccard(sk, rep_sketch, self.sketch_bits)
                if j >= self.threshold and (best is None or j > best[0]):
                    best = (j, rep_url)
            if best is not None and best[1] == url:
                results.append(None)  # already a representative (re-check after a restart)
            elif best is not None:
                results.append(best[1])
                self.near_duplicates += 1
            else:
                results.append(None)
                for kb in key_ints[i]:
                    local_band.setdefault(kb, len(new_reps))
                new_reps.append((url, sk, key_ints[i]))
        if len(new_reps) >= self.flush_reps or time.monotonic() - self.flushed_at >= self.flush_seconds:
            self.flush()
        self.checked += len(urls)
        return results

    def flush(self) -> None:
        """Write the representatives waiting in memory to the store."""
        if self.pending:
            self.store.add([(rep_id(u), u, s, kb) for u, s, kb in self.pending])
        self.pending, self.pending_band, self.flushed_at = [], {}, time.monotonic()

    def stats(self) -> dict[str, int]:
        """Pages checked and near-duplicates found by this instance."""
        return {"checked": self.checked, "near_duplicates": self.near_duplicates}

    def close(self) -> None:
        self.flush()
        self.store.close()


def near_dup_index(settings: Settings, store: object) -> NearDupIndex | None:
    """The crawl's near-duplicate index (``near_dup`` setting) over ``store``, the crawl's duplicate
    stores (actors/visit/duplicates.py), with the crawl-time parameters of :func:`near_dup_meta`."""
    if not settings.near_dup:
        return None
    return NearDupIndex(store=store, flush_reps=1024, flush_seconds=2.0)
