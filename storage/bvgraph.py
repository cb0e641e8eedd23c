"""A WebGraph BV graph on disk: reader (``BVGraph``) and writer (``BVGraph.store``).

Files of a graph with basename ``B`` (the WebGraph/LAW layout, readable by WebGraph Java and
webgraph-rs, and we read theirs):

* ``B.graph``      the big-endian bit stream of node records (see ``storage.bv_decode``);
* ``B.offsets``    γ-coded gaps between the bit offsets of consecutive records, ``n + 1`` of
                   them (the first is the offset of node 0, i.e. 0);
* ``B.properties`` Java properties: ``nodes``, ``arcs``, ``windowsize``, ``maxrefcount``,
                   ``minintervallength``, ``zetak``, ``compressionflags`` (we support the
                   default, empty, set of codes), ``bitsperlink`` and other statistics;
* ``B.ef``         the offsets again, as the ε-serde-serialized sux Elias–Fano sequence that
                   webgraph-rs and the ``webgraph`` PyPI package load instead of ``B.offsets``
                   (``storage.webgraph_ef``); ``store`` writes it, we never read it.

Access: ``successors(v)`` and ``outdegree(v)`` by random access through the offsets,
``iter_nodes()`` sequentially, ``to_csr()`` decodes everything once into numpy arrays (the
form analytics use; predecessors come from the transpose ``B-t``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from raycrawl.errors import UserError
from raycrawl.storage import bv_decode
from raycrawl.storage.codes import read_gamma_sequence, words_from_bytes
from raycrawl.storage.java_properties import read_properties

log = logging.getLogger(__name__)

SUPPORTED_FLAGS = ("",)


def write_properties(path: str | Path, props: dict[str, object]) -> None:
    lines = ["#BVGraph properties (written by raycrawl)"]
    lines += [f"{k}={v}" for k, v in props.items()]
    Path(path).write_text("\n".join(lines) + "\n", encoding="latin-1")


class BVGraph:
    """An immutable BV-compressed graph loaded in memory (the ``.graph`` stream is small)."""

    def __init__(self, basename: str | Path, props: dict[str, str], words: np.ndarray,
                 graph_bits: int, offsets: np.ndarray | None) -> None:
        self.basename = str(basename)
        self.properties = props
        self.num_nodes = int(props["nodes"])
        self.num_arcs = int(props["arcs"])
        self.window = int(props.get("windowsize", 7))
        self.max_ref_count = int(props.get("maxrefcount", 3))
        self.min_interval = int(props.get("minintervallength", 4))
        self.zeta_k = int(props.get("zetak", 3))
        self._words = words
        self._graph_bits = graph_bits
        self._offsets = offsets
        self._outdegrees: np.ndarray | None = None

    # ---- loading -------------------------------------------------------------------------

    @classmethod
    def load(cls, basename: str | Path) -> BVGraph:
        """Load ``basename.{properties,graph,offsets}``.

        Raises ``UserError`` for a missing, truncated or corrupt graph, or unsupported codes."""
        basename = str(basename)
        props = read_properties(basename + ".properties")
        for key in ("nodes", "arcs"):
            if key not in props or not props[key].lstrip("-").isdigit() or int(props[key]) < 0:
                raise UserError(f"{basename}.properties: missing or bad '{key}'")
        cls_name = props.get("graphclass", "")
        if cls_name and not cls_name.endswith("BVGraph"):
            raise UserError(f"{basename}: graph class {cls_name} is not a BV graph")
        flags = props.get("compressionflags", "").strip()
        if flags not in SUPPORTED_FLAGS:
            raise UserError(f"{basename}: compression flags '{flags}' are not supported "
                            "(only WebGraph's default codes are)")
        if props.get("endianness", "big").lower() not in ("big", "be"):
            raise UserError(f"{basename}: only big-endian BV graphs are supported")
        try:
            data = Path(basename + ".graph").read_bytes()
        except OSError as e:
            raise UserError(f"cannot read {basename}.graph: {e.strerror or e}") from e
        words = words_from_bytes(data)
        n = int(props["nodes"])
        offsets = None
        off_path = Path(basename + ".offsets")
        if off_path.exists():
            offsets = _load_offsets(off_path, n, len(data) * 8)
        g = cls(basename, props, words, len(data) * 8, offsets)
        log.debug("loaded %s: %d nodes, %d arcs", basename, g.num_nodes, g.num_arcs)
        return g

    def _require_offsets(self) -> np.ndarray:
        if self._offsets is None:
            # Without a .offsets file, one sequential pass finds where each record starts.
            self._decode_all()
        assert self._offsets is not None
        return self._offsets

    def _decode_all(self) -> tuple[np.ndarray, np.ndarray]:
        try:
            indptr, indices, offsets = bv_decode.decode_all(
                self._words, self.num_nodes, self.num_arcs, self.window, self.min_interval,
                self.zeta_k, self._graph_bits)
        except ValueError as e:
            raise UserError(f"{self.basename}: {e}") from e
        if self._offsets is None:
            self._offsets = offsets
        return indptr, indices

    # ---- access --------------------------------------------------------------------------

    def successors(self, v: int) -> np.ndarray:
        """Sorted successors of node ``v`` (int64 array). Raises IndexError if out of range."""
        if not 0 <= v < self.num_nodes:
            raise IndexError(f"node {v} out of range [0, {self.num_nodes})")
        try:
            return bv_decode.decode_successors(self._words, self._require_offsets(), v, self.num_nodes,
                                               self.window, self.min_interval, self.zeta_k,
                                               self._graph_bits)
        except ValueError as e:
            raise UserError(f"{self.basename}: {e}") from e

    def outdegrees(self) -> np.ndarray:
        """Outdegree of every node (int64 array)."""
        if self._outdegrees is None:
            self._outdegrees = bv_decode.outdegrees_at(self._words, self._require_offsets(), self.num_nodes)
        return self._outdegrees

    def outdegree(self, v: int) -> int:
        if not 0 <= v < self.num_nodes:
            raise IndexError(f"node {v} out of range [0, {self.num_nodes})")
        return int(self.outdegrees()[v])

    def to_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Decode the whole graph: ``(indptr int64[n+1], indices int32[m])``, successors of
        ``v`` sorted in ``indices[indptr[v]:indptr[v+1]]``. Raises UserError if corrupt."""
        return self._decode_all()

    def iter_nodes(self) -> Iterator[tuple[int, np.ndarray]]:
        """Sequential pass: ``(v, successors)`` for every node in id order."""
        indptr, indices = self.to_csr()
        for v in range(self.num_nodes):
            yield v, indices[indptr[v] : indptr[v + 1]]

    def arcs(self) -> tuple[np.ndarray, np.ndarray]:
        """All arcs as two arrays ``(src, dst)`` in (src, dst) order."""
        indptr, indices = self.to_csr()
        src = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(indptr))
        return src, indices.astype(np.int64)

    @property
    def bits_per_link(self) -> float:
        """Size of the ``.graph`` stream per arc (what WebGraph reports as ``bitsperlink``)."""
        return self._graph_bits / self.num_arcs if self.num_arcs else 0.0

    def __repr__(self) -> str:
        return f"BVGraph({self.basename!r}, nodes={self.num_nodes}, arcs={self.num_arcs})"


def _load_offsets(path: Path, n: int, graph_bits: int) -> np.ndarray:
    """Bit offsets of the ``n`` records from a ``.offsets`` file (``n + 1`` γ gaps)."""
    words = words_from_bytes(path.read_bytes())
    try:
        gaps, used = read_gamma_sequence(words, n + 1)
    except ValueError as e:
        raise UserError(f"{path}: {e}") from e
    if used > (len(words) - 3) * 64:
        raise UserError(f"{path}: truncated (fewer than {n + 1} offsets)")
    offsets = np.cumsum(gaps)
    if n and offsets[-1] > graph_bits:
        raise UserError(f"{path}: offsets run past the end of the .graph file (truncated graph?)")
    return offsets[:n].astype(np.int64)


# ---- writing ---------------------------------------------------------------------------------


def csr_from_arcs(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the arcs ``src[i] -> dst[i]``: lists sorted, duplicate arcs dropped."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if len(src) != len(dst):
        raise ValueError("src and dst differ in length")
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise ValueError("arc endpoint out of range")
    key = np.unique(src * max(num_nodes, 1) + dst)
    s, d = np.divmod(key, max(num_nodes, 1))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(s, minlength=num_nodes), out=indptr[1:])
    return indptr, d.astype(np.int32 if num_nodes < 2**31 else np.int64)


def transpose_csr(num_nodes: int, indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the transpose (predecessor lists), lists sorted."""
    src = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    order = np.lexsort((src, dst))
    tindptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=tindptr[1:])
    return tindptr, src[order].astype(indices.dtype)


def store(basename: str | Path, indptr: np.ndarray, indices: np.ndarray, *, window: int = 7,
          max_ref_count: int = 3, min_interval: int = 4, zeta_k: int = 3) -> dict[str, object]:
    """Write a BV graph ``basename.{graph,offsets,properties,ef}`` from CSR arrays.

    Successor lists must be strictly increasing and within ``[0, n)`` (``csr_from_arcs``
    makes them so). Parameters are WebGraph's (defaults: its ``-w 7 -m 3 -i 4``, ζ3).
    Returns the properties written."""
    from raycrawl.storage import bv_writer, webgraph_ef
    from raycrawl.storage.codes import bytes_from_words, write_gamma_sequence

    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n = len(indptr) - 1
    m = int(indptr[-1]) if n >= 0 else 0
    assert n >= 0 and indptr[0] == 0 and len(indices) == m, "malformed CSR"
    assert window >= 0 and max_ref_count >= 1 and min_interval >= 0 and zeta_k >= 1
    if m:
        src = np.repeat(np.arange(n), np.diff(indptr))
        if indices.min() < 0 or indices.max() >= n:
            raise ValueError("successor out of range")
        if np.any((np.diff(indices) <= 0) & (np.diff(src) == 0)):
            raise ValueError("successor lists must be strictly increasing (use csr_from_arcs)")
    refs, total = bv_writer.choose_references(indptr, indices, window, max_ref_count, min_interval, zeta_k)
    words, offsets, stats = bv_writer.encode_graph(indptr, indices, refs, total, window, min_interval, zeta_k)
    nbits = int(offsets[-1])
    assert nbits == total, "encoder and cost model disagree"
    basename = str(basename)
    Path(basename).parent.mkdir(parents=True, exist_ok=True)
    Path(basename + ".graph").write_bytes(bytes_from_words(words, nbits, align=1))
    gap_words, gap_bits = write_gamma_sequence(np.diff(offsets, prepend=0))
    Path(basename + ".offsets").write_bytes(bytes_from_words(gap_words, gap_bits, align=1))
    # The Elias–Fano offsets webgraph-rs (and the `webgraph` PyPI package) load instead of
    # .offsets: cheap (a few bits per node), and makes every graph we write usable there.
    webgraph_ef.write_ef(basename, offsets)
    st = [int(v) for v in stats]
    props: dict[str, object] = {
        "graphclass": "it.unimi.dsi.webgraph.BVGraph",
        "version": 0,
        "nodes": n,
        "arcs": m,
        "windowsize": window,
        "maxrefcount": max_ref_count,
        "minintervallength": min_interval,
        "zetak": zeta_k,
        "compressionflags": "",
        "bitsperlink": f"{nbits / m:.3f}" if m else "0",
        "bitspernode": f"{nbits / n:.3f}" if n else "0",
        "avgdist": f"{st[bv_writer.ST_SUM_REF] / n:.3f}" if n else "0",
        "copiedarcs": st[bv_writer.ST_COPIED],
        "intervalisedarcs": st[bv_writer.ST_INTERVALISED],
        "residualarcs": st[bv_writer.ST_RESIDUAL_ARCS],
        "bitsforoutdegrees": st[bv_writer.ST_OUTDEG],
        "bitsforreferences": st[bv_writer.ST_REF],
        "bitsforblocks": st[bv_writer.ST_BLOCKS],
        "bitsforintervals": st[bv_writer.ST_INTERVALS],
        "bitsforresiduals": st[bv_writer.ST_RESIDUALS],
        "length": nbits,
    }
    write_properties(basename + ".properties", props)
    log.info("stored %s: %d nodes, %d arcs, %.3f bits/link", basename, n, m, nbits / m if m else 0.0)
    return props
