"""The bitstream archive of summaries (seed 000, §2): document lengths and term counts of a crawl.

A document summary is ⟨ℓ, s, ⟨t0,c0⟩ … ⟨t_{s-1},c_{s-1}⟩⟩: length in words, number of distinct
terms and term/count pairs. Document ids are the graph's node ids.

Terms are renumbered by **frequency rank** (term 0 = the most frequent; frequency = number of
occurrences in the collection, ties broken by the term string), so term lists hold small numbers
and gap-code well. A summary is written as:

* ℓ with the *length* code (δ by default);
* s with the *size* code (ζ3);
* t0, then t_i − t_{i−1} − 1 for the ascending term ids, with the *term-gap* code (ζ2);
* the counts in the inverse order of term frequency (least frequent term first, as high-frequency
  terms tend to have high counts): c_{s−1} − 1, then ν(c_i − c_{i+1}) with the *count-gap* code
  (γ), where ν(x) = 2x for x ≥ 0 and 2|x| − 1 for x < 0.

Codes are 0-based, written big-endian with ``dsi-bitstream`` (WebGraph's conventions). Decoding
uses a numba decoder over the raw words (storage/summary_decode.py: dsi-bitstream's per-call cost
from Python is too high for bulk scans); the tests check one against the other.

Files of an archive ``BASE`` (default ``DIR/summaries/summaries``):

=================== ===========================================================================
``BASE.bits``       the summaries, contiguous, in increasing document id order
``BASE.pointers.ef`` Elias–Fano list of the n+1 bit offsets of the summaries (the last = total)
``BASE.missing.ef`` Elias–Fano set of the node ids in [0, nodes) that have no summary
``BASE.terms``      the term permutation: line r is ``term<TAB>df<TAB>cf`` of term id r
``BASE.properties`` JSON: counts, codes, min_df, bits, format version
``sub/NAME.ef``     sub-archives: Elias–Fano sets of node ids layered over the archive
=================== ===========================================================================

Given a node id d, its position in the bit stream is ``d − missing.rank(d)`` (unless d is
missing) and its bit offset ``pointers[pos]``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from raycrawl.errors import UserError
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.elias_fano import EliasFano, EliasFanoError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
DEFAULT_BASENAME = "summaries"
DEFAULT_CODES = {"length": "delta", "size": "zeta3", "term_gap": "zeta2", "count_gap": "gamma"}
DEFAULT_MIN_DF = 20

# Code kinds understood by both the writer and the numba decoder.
_GAMMA, _DELTA, _ZETA, _UNARY = 0, 1, 2, 3
_CODE_RE = re.compile(r"^(gamma|delta|unary|zeta(\d+))$")


class ArchiveError(UserError):
    """A missing, malformed or truncated archive of summaries."""


def parse_code(name: str) -> tuple[int, int]:
    """``"gamma"``, ``"delta"``, ``"unary"`` or ``"zetaK"`` (K ≥ 1) → (kind, k) for the decoder."""
    m = _CODE_RE.match(name.strip().lower())
    if not m:
        raise UserError(f"unknown code {name!r} (use gamma, delta, unary or zetaK, e.g. zeta3)")
    if m.group(2):
        k = int(m.group(2))
        if not 1 <= k <= 16:
            raise UserError(f"zeta parameter must be in 1..16, got {k}")
        return _ZETA, k
    return {"gamma": _GAMMA, "delta": _DELTA, "unary": _UNARY}[m.group(1)], 0


def nu(x: int) -> int:
    """ν: Z → N, 2x for x ≥ 0 and 2|x| − 1 for x < 0."""
    return 2 * x if x >= 0 else -2 * x - 1


def nu_inverse(y: int) -> int:
    return y >> 1 if y & 1 == 0 else -((y + 1) >> 1)


# -- writing ------------------------------------------------------------------------------------


def _writer_fn(w, name: str):
    """A one-argument callable writing a value with ``name``'s code and returning its bit length."""
    kind, k = parse_code(name)
    if kind == _GAMMA:
        return w.write_gamma
    if kind == _DELTA:
        return w.write_delta
    if kind == _UNARY:
        return w.write_unary
    return lambda x: w.write_zeta(x, k=k)


class SummaryBitWriter:
    """Appends summaries to ``BASE.bits`` in increasing document id order (pass two).

    Callers give the renumbered term ids (ascending) and their counts; :meth:`close` writes the
    pointer list, the missing set, the term permutation and the properties.
    """

    def __init__(self, base: str | Path, num_nodes: int, codes: dict[str, str] | None = None) -> None:
        import dsi_bitstream

        self.base = Path(base)
        self.base.parent.mkdir(parents=True, exist_ok=True)
        self.num_nodes = int(num_nodes)
        self.codes = {**DEFAULT_CODES, **(codes or {})}
        self._w = dsi_bitstream.BitWriterBigEndian(str(self.base) + ".bits")
        self._len = _writer_fn(self._w, self.codes["length"])
        self._size = _writer_fn(self._w, self.codes["size"])
        self._tgap = _writer_fn(self._w, self.codes["term_gap"])
        self._cgap = _writer_fn(self._w, self.codes["count_gap"])
        self.offsets: list[int] = [0]
        self.ids: list[int] = []
        self.pairs = 0
        self.bits_by_part = {"length": 0, "size": 0, "term_gap": 0, "count_gap": 0}

    def add(self, doc_id: int, length: int, term_ids: np.ndarray, counts: np.ndarray) -> None:
        """Append the summary of ``doc_id`` (ids strictly increasing across calls)."""
        assert not self.ids or doc_id > self.ids[-1], "summaries must come in increasing id order"
        assert 0 <= doc_id < self.num_nodes, f"doc id {doc_id} outside [0, {self.num_nodes})"
        t = np.asarray(term_ids, dtype=np.int64).tolist()
        c = np.asarray(counts, dtype=np.int64).tolist()
        s = len(t)
        assert s == len(c) and all(x >= 1 for x in c), "counts must be ≥ 1, one per term"
        assert all(t[i] < t[i + 1] for i in range(s - 1)), "term ids must be strictly ascending"
        b = self.bits_by_part
        lb = self._len(int(length))
        sb = self._size(s)
        tg = 0
        if s:
            tg += self._tgap(t[0])
            for i in range(1, s):
                tg += self._tgap(t[i] - t[i - 1] - 1)
        cg = 0
        if s:
            cg += self._cgap(c[-1] - 1)
            for i in range(s - 2, -1, -1):
                cg += self._cgap(nu(c[i] - c[i + 1]))
        b["length"] += lb
        b["size"] += sb
        b["term_gap"] += tg
        b["count_gap"] += cg
        self.offsets.append(self.offsets[-1] + lb + sb + tg + cg)
        self.ids.append(int(doc_id))
        self.pairs += s

    def close(self, terms: list[str], df: Iterable[int], cf: Iterable[int], min_df: int,
              extra: dict | None = None) -> dict:
        """Flush the bit stream and write the satellite files; returns the properties."""
        self._w.flush()
        del self._w
        total_bits = self.offsets[-1]
        size = os.path.getsize(str(self.base) + ".bits")
        assert size * 8 >= total_bits, "bit stream shorter than the summaries written"
        EliasFano.from_values(np.array(self.offsets, dtype=np.int64), total_bits).save(
            str(self.base) + ".pointers.ef")
        present = np.zeros(self.num_nodes, dtype=bool)
        present[np.array(self.ids, dtype=np.int64)] = True
        missing = np.flatnonzero(~present)
        EliasFano.from_values(missing, max(self.num_nodes, 1)).save(str(self.base) + ".missing.ef")
        df, cf = list(df), list(cf)
        assert len(df) == len(cf) == len(terms)
        with open(str(self.base) + ".terms", "w", encoding="utf-8") as f:
            for t, d, c in zip(terms, df, cf, strict=True):
                assert "\t" not in t and "\n" not in t
                f.write(f"{t}\t{d}\t{c}\n")
        props = {
            "format": "raycrawl-summaries",
            "version": FORMAT_VERSION,
            "nodes": self.num_nodes,
            "documents": len(self.ids),
            "missing": int(len(missing)),
            "terms": len(terms),
            "pairs": self.pairs,
            "total_bits": total_bits,
            "bits_by_part": self.bits_by_part,
            "codes": self.codes,
            "min_df": min_df,
            "term_order": "collection frequency, descending; ties by term",
            **(extra or {}),
        }
        Path(str(self.base) + ".properties").write_text(json.dumps(props, indent=1) + "\n")
        return props



# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """⟨ℓ, s, pairs⟩ of one document; ``term_ids`` are frequency ranks (0 = most frequent)."""

    doc_id: int
    length: int
    term_ids: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> int:
        return len(self.term_ids)


@dataclass
class DecodedSummaries:
    """A block of summaries decoded at once, in CSR form: document i's pairs are
    ``term_ids[offsets[i]:offsets[i+1]]`` / ``counts[...]``."""

    doc_ids: np.ndarray
    lengths: np.ndarray
    offsets: np.ndarray
    term_ids: np.ndarray
    counts: np.ndarray
    meta: dict = field(default_factory=dict)


def archive_base(path: str | Path) -> Path:
    """The archive basename for a crawl dir, a ``summaries/`` dir, or a basename itself."""
    p = Path(path)
    if (layout(p).summaries / f"{DEFAULT_BASENAME}.properties").exists():
        return layout(p).summaries / DEFAULT_BASENAME
    if (p / f"{DEFAULT_BASENAME}.properties").exists():
        return p / DEFAULT_BASENAME
    if Path(str(p) + ".properties").exists():
        return p
    raise ArchiveError(f"no archive of summaries at {path} (run `raycrawl summaries build DIR` first)")


@functools.cache
def _decoder():
    """storage/summary_decode.py (numba), imported by the first reader: a crawl's writer never is."""
    from raycrawl.storage import summary_decode

    return summary_decode


class SummaryArchive:
    """Random and sequential access to an archive of summaries, with the original terms.

    ``get(node)`` → :class:`Summary` or None when the node has no summary (fetch error, not HTML);
    ``term(t)`` / ``term_id(word)`` translate between frequency ranks and original terms, so
    ``get_terms(node)`` gives back ``{term: count}``; ``decode_all()`` scans everything at once.
    """

    def __init__(self, base: Path, props: dict, words: np.ndarray, pointers: EliasFano,
                 missing: EliasFano, terms: list[str], df: np.ndarray, cf: np.ndarray) -> None:
        self.base = base
        self.props = props
        self.words = words
        self.pointers = pointers
        self.missing = missing
        self.terms = terms
        self.df = df
        self.cf = cf
        self.num_nodes = int(props["nodes"])
        self.documents = int(props["documents"])
        self.total_bits = int(props["total_bits"])
        codes = props["codes"]
        ck = []
        for part in ("length", "size", "term_gap", "count_gap"):
            ck.extend(parse_code(codes[part]))
        self._ck = np.array(ck, dtype=np.int64)
        self._term_index: dict[str, int] | None = None

    @classmethod
    def open(cls, path: str | Path) -> SummaryArchive:
        """Open the archive of a crawl dir / summaries dir / basename; :class:`ArchiveError` if bad."""
        base = archive_base(path)
        try:
            props = json.loads(Path(str(base) + ".properties").read_text())
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"{base}.properties: unreadable ({exc})") from None
        for key in ("nodes", "documents", "terms", "total_bits", "codes", "pairs"):
            if key not in props:
                raise ArchiveError(f"{base}.properties: missing key {key!r}")
        if props.get("version") != FORMAT_VERSION:
            raise ArchiveError(f"{base}.properties: unsupported format version {props.get('version')}")
        try:
            data = Path(str(base) + ".bits").read_bytes()
            pointers = EliasFano.load(str(base) + ".pointers.ef")
            missing = EliasFano.load(str(base) + ".missing.ef")
            lines = Path(str(base) + ".terms").read_text(encoding="utf-8").splitlines()
        except EliasFanoError as exc:
            raise ArchiveError(str(exc)) from None
        except OSError as exc:
            raise ArchiveError(f"archive {base}: {exc.strerror}: {exc.filename}") from None
        total_bits = int(props["total_bits"])
        if len(data) * 8 < total_bits:
            raise ArchiveError(f"{base}.bits: truncated ({len(data) * 8} bits, expected {total_bits})")
        if len(pointers) != props["documents"] + 1 or pointers[len(pointers) - 1] != total_bits:
            raise ArchiveError(f"{base}.pointers.ef: does not match the properties")
        if len(missing) != props["nodes"] - props["documents"]:
            raise ArchiveError(f"{base}.missing.ef: does not match the properties")
        if len(lines) != props["terms"]:
            raise ArchiveError(f"{base}.terms: {len(lines)} terms, properties say {props['terms']}")
        terms, df, cf = [], np.empty(len(lines), np.int64), np.empty(len(lines), np.int64)
        for i, line in enumerate(lines):
            parts = line.split("\t")
            if len(parts) != 3:
                raise ArchiveError(f"{base}.terms: malformed line {i + 1}")
            terms.append(parts[0])
            df[i], cf[i] = int(parts[1]), int(parts[2])
        from raycrawl.storage.codes import words_from_bytes  # (numba: a reader's import)

        return cls(base, props, words_from_bytes(data), pointers, missing, terms, df, cf)

    def __len__(self) -> int:
        return self.documents

    def ordinal(self, node: int) -> int | None:
        """Position of ``node``'s summary in the stream, or None if the node has none."""
        if not 0 <= node < self.num_nodes:
            raise IndexError(f"node {node} outside [0, {self.num_nodes})")
        r = self.missing.rank(node)
        if r < len(self.missing) and self.missing[r] == node:
            return None
        return node - r

    def __contains__(self, node: int) -> bool:
        return 0 <= node < self.num_nodes and self.ordinal(node) is not None

    def get(self, node: int) -> Summary | None:
        """The summary of ``node`` (None if it has none); O(1) via the two Elias–Fano structures."""
        i = self.ordinal(node)
        if i is None:
            return None
        start = self.pointers[i]
        length, terms, counts, end = _decoder().decode_one(self.words, start, self.total_bits, self._ck)
        if length < 0 or end != self.pointers[i + 1]:
            raise ArchiveError(f"{self.base}.bits: corrupt summary for node {node}")
        return Summary(node, int(length), terms, counts)

    def get_terms(self, node: int) -> dict[str, int] | None:
        """``{original term: count}`` of ``node`` (None if it has no summary)."""
        s = self.get(node)
        if s is None:
            return None
        return {self.terms[t]: int(c) for t, c in zip(s.term_ids.tolist(), s.counts.tolist(), strict=True)}

    def term(self, t: int) -> str:
        return self.terms[t]

    def term_id(self, word: str) -> int | None:
        """Frequency rank of an original term, or None if it is not in the archive's dictionary."""
        if self._term_index is None:
            self._term_index = {w: i for i, w in enumerate(self.terms)}
        return self._term_index.get(word)

    def node_ids(self) -> np.ndarray:
        """Node ids that have a summary, ascending (the complement of the missing set)."""
        present = np.ones(self.num_nodes, dtype=bool)
        present[self.missing.to_array()] = False
        return np.flatnonzero(present)

    def decode_all(self) -> DecodedSummaries:
        """Every summary, decoded sequentially in one numba pass (the fast bulk path)."""
        n = self.documents
        lengths = np.empty(n, np.int64)
        sizes = np.empty(n, np.int64)
        ends = np.empty(n, np.int64)
        term_ids = np.empty(int(self.props["pairs"]), np.int64)
        counts = np.empty(int(self.props["pairs"]), np.int64)
        p = _decoder().decode_range(self.words, 0, n, self.total_bits, self._ck, lengths, sizes, term_ids, counts, ends)
        if p < 0:
            raise ArchiveError(f"{self.base}.bits: corrupt summary at position {-p - 1}")
        if p != term_ids.shape[0] or (n and ends[-1] != self.total_bits):
            raise ArchiveError(f"{self.base}.bits: decoded stream does not match the properties")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return DecodedSummaries(self.node_ids(), lengths, offsets, term_ids, counts)

    def __iter__(self) -> Iterator[Summary]:
        """Summaries in increasing node id order."""
        d = self.decode_all()
        for i, node in enumerate(d.doc_ids.tolist()):
            a, b = d.offsets[i], d.offsets[i + 1]
            yield Summary(node, int(d.lengths[i]), d.term_ids[a:b], d.counts[a:b])

    def stats(self) -> dict:
        """Sizes in bits per summary / per pair / pointer bits, for ``summaries stats``."""
        n = max(self.documents, 1)
        pairs = max(int(self.props["pairs"]), 1)
        return {
            "nodes": self.num_nodes,
            "documents": self.documents,
            "missing": len(self.missing),
            "terms": len(self.terms),
            "pairs": int(self.props["pairs"]),
            "min_df": self.props.get("min_df"),
            "codes": self.props["codes"],
            "bits_per_summary": self.total_bits / n,
            "bits_per_pair": (self.total_bits - self.props["bits_by_part"]["length"]
                              - self.props["bits_by_part"]["size"]) / pairs,
            "bits_by_part_per_summary": {k: v / n for k, v in self.props["bits_by_part"].items()},
            "pointer_bits_per_summary": self.pointers.bits / n,
            "missing_bits_per_node": self.missing.bits / max(self.num_nodes, 1),
            "data_bytes": (self.total_bits + 7) // 8,
        }


# -- sub-archives -------------------------------------------------------------------------------


class SubArchive:
    """A subset of an archive's nodes, layered over it with one more Elias–Fano set (seed 000).

    Sub-archive position r ↔ node ``ids[r]``; ``get(r)`` reads through to the parent archive.
    """

    def __init__(self, archive: SummaryArchive, ids: EliasFano, name: str = "") -> None:
        self.archive = archive
        self.ids = ids
        self.name = name

    @staticmethod
    def path_for(archive: SummaryArchive, name: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise UserError(f"bad sub-archive name {name!r} (letters, digits, _ . - only)")
        return archive.base.parent / "sub" / f"{name}.ef"

    @classmethod
    def create(cls, archive: SummaryArchive, name: str, nodes: Iterable[int]) -> SubArchive:
        """Save the sub-archive of the given node ids (deduplicated, sorted)."""
        ids = np.unique(np.fromiter(nodes, dtype=np.int64))
        if ids.size and (ids[0] < 0 or ids[-1] >= archive.num_nodes):
            raise UserError(f"sub-archive ids must be node ids in [0, {archive.num_nodes})")
        ef = EliasFano.from_values(ids, max(archive.num_nodes, 1))
        path = cls.path_for(archive, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        ef.save(path)
        return cls(archive, ef, name)

    @classmethod
    def open(cls, archive: SummaryArchive, name: str) -> SubArchive:
        path = cls.path_for(archive, name)
        try:
            return cls(archive, EliasFano.load(path), name)
        except FileNotFoundError:
            raise ArchiveError(f"no sub-archive {name!r} ({path})") from None
        except EliasFanoError as exc:
            raise ArchiveError(str(exc)) from None

    def __len__(self) -> int:
        return len(self.ids)

    def node(self, r: int) -> int:
        """Node id of sub-archive position r."""
        return self.ids[r]

    def position(self, node: int) -> int | None:
        """Sub-archive position of ``node``, or None if it is not in the subset."""
        r = self.ids.rank(node)
        return r if r < len(self.ids) and self.ids[r] == node else None

    def get(self, r: int) -> Summary | None:
        return self.archive.get(self.node(r))

    def __iter__(self) -> Iterator[Summary | None]:
        for node in self.ids.to_array().tolist():
            yield self.archive.get(node)


# -- the two-pass build (from the spill files of storage/summary_spill.py) ---------------------------

@dataclass
class TermStatistics:
    """Pass one: document and collection frequencies of every term."""

    df: dict[str, int] = field(default_factory=dict)
    cf: dict[str, int] = field(default_factory=dict)
    documents: int = 0

    def add(self, counts: dict[str, int]) -> None:
        df, cf = self.df, self.cf
        for t, c in counts.items():
            df[t] = df.get(t, 0) + 1
            cf[t] = cf.get(t, 0) + c
        self.documents += 1

    def merge(self, other: TermStatistics) -> None:
        """Combine statistics gathered separately (per agent)."""
        for t, d in other.df.items():
            self.df[t] = self.df.get(t, 0) + d
        for t, c in other.cf.items():
            self.cf[t] = self.cf.get(t, 0) + c
        self.documents += other.documents

    def dictionary(self, min_df: int) -> list[str]:
        """Terms kept (df ≥ min_df) in frequency-rank order: cf descending, ties by term."""
        kept = [t for t, d in self.df.items() if d >= min_df and "\t" not in t and "\n" not in t]
        kept.sort(key=lambda t: (-self.cf[t], t))
        return kept


def build_archive(records: Iterable[dict] | None, base: str | Path, id_of, num_nodes: int,
                  min_df: int = DEFAULT_MIN_DF, codes: dict[str, str] | None = None,
                  records_again=None, extra: dict | None = None) -> dict:
    """Build an archive from document records ({"url", "length", "terms"}) in two passes.

    Pass one gathers term statistics (df, cf) to choose and renumber the dictionary; pass two
    maps each document to its node id (``id_of(url)`` → int or None to skip), renumbers its terms,
    sorts documents by id and writes them. ``records_again`` is a zero-argument callable giving a
    fresh iterator for pass two (e.g. re-reading the spill files); without it, records are held.
    Returns the archive properties.
    """
    if min_df < 1:
        raise UserError(f"min_df must be ≥ 1, got {min_df}")
    for part in (codes or {}).values():
        parse_code(part)
    stats = TermStatistics()
    held: list[dict] | None = None if records_again else []
    for rec in records or ():
        stats.add(rec["terms"])
        if held is not None:
            held.append(rec)
    dictionary = stats.dictionary(min_df)
    rank = {t: i for i, t in enumerate(dictionary)}
    docs: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
    unmapped = dup = 0
    for rec in (records_again() if records_again else held):
        node = id_of(rec["url"])
        if node is None:
            unmapped += 1
            continue
        if not 0 <= node < num_nodes:
            raise UserError(f"node id {node} of {rec['url']} outside [0, {num_nodes})")
        if node in docs:
            dup += 1  # a re-fetch or two agents fetching the same URL: keep the first
            continue
        pairs = sorted((rank[t], c) for t, c in rec["terms"].items() if t in rank)
        t_arr = np.fromiter((p[0] for p in pairs), np.int64, len(pairs))
        c_arr = np.fromiter((p[1] for p in pairs), np.int64, len(pairs))
        docs[node] = (int(rec["length"]), t_arr, c_arr)
    if unmapped:
        log.warning("%d documents have no node id in the graph: left out of the archive", unmapped)
    if dup:
        log.info("%d duplicate documents (same node id) ignored", dup)
    writer = SummaryBitWriter(base, num_nodes, codes)
    for node in sorted(docs):
        length, t_arr, c_arr = docs[node]
        writer.add(node, length, t_arr, c_arr)
    df = [stats.df[t] for t in dictionary]
    cf = [stats.cf[t] for t in dictionary]
    info = {"source_documents": stats.documents, "unmapped_documents": unmapped, **(extra or {})}
    return writer.close(dictionary, df, cf, min_df, info)


def merge_archives(archives: list[SummaryArchive], base: str | Path, min_df: int = 1,
                   codes: dict[str, str] | None = None) -> dict:
    """Merge archives built separately (one per agent) over the same node ids into one.

    Pass one adds up the term statistics of all archives (df and cf per original term) and
    renumbers the union dictionary by frequency; pass two rewrites every summary with the new
    term ids, in node order. Archives meant for merging should be built with ``min_df`` 1: a term
    an agent dropped locally cannot be counted back. A node present in several archives keeps
    its first summary.
    """
    if not archives:
        raise UserError("nothing to merge")
    nodes = {a.num_nodes for a in archives}
    if len(nodes) != 1:
        raise UserError(f"archives cover different node sets ({sorted(nodes)} nodes): not mergeable")
    stats = TermStatistics()
    for a in archives:
        local = TermStatistics(dict(zip(a.terms, a.df.tolist(), strict=True)),
                               dict(zip(a.terms, a.cf.tolist(), strict=True)), a.documents)
        stats.merge(local)
    dictionary = stats.dictionary(min_df)
    rank = {t: i for i, t in enumerate(dictionary)}
    decoded, gmaps = [], []
    for a in archives:
        decoded.append(a.decode_all())
        gmaps.append(np.array([rank.get(t, -1) for t in a.terms], dtype=np.int64))
    owner = np.concatenate([np.full(len(d.doc_ids), k, np.int64) for k, d in enumerate(decoded)])
    index = np.concatenate([np.arange(len(d.doc_ids), dtype=np.int64) for d in decoded])
    ids = np.concatenate([d.doc_ids for d in decoded])
    order = np.lexsort((owner, ids))  # by node, first archive first
    writer = SummaryBitWriter(base, nodes.pop(), codes)
    last = -1
    dup = 0
    for j in order.tolist():
        node = int(ids[j])
        if node == last:
            dup += 1
            continue
        last = node
        d, g = decoded[owner[j]], gmaps[owner[j]]
        a_, b_ = d.offsets[index[j]], d.offsets[index[j] + 1]
        t = g[d.term_ids[a_:b_]]
        c = d.counts[a_:b_]
        keep = t >= 0
        t, c = t[keep], c[keep]
        o = np.argsort(t)
        writer.add(node, int(d.lengths[index[j]]), t[o], c[o])
    if dup:
        log.warning("%d nodes were in several archives: first summary kept", dup)
    return writer.close(dictionary, [stats.df[t] for t in dictionary], [stats.cf[t] for t in dictionary],
                        min_df, {"merged_from": [str(a.base) for a in archives]})
