"""What ``raycrawl rank`` writes: ranks table (parquet / tsv), ``rank.json``, the (K, K*) density PNG, top-k.

Files in the output directory ``DIR``:

``ranks.parquet`` / ``ranks.tsv``
    one row per node, columns ``node url pagerank cheirank K Kstar K2`` (``url`` is empty when the
    graph has no URL map). The TSV has a header line; floats are written as the shortest decimal that round-trips.
``rank.json``
    ``N``, ``arcs``, ``alpha``, ``tol``, ``kappa``, per vector (``pagerank``, ``cheirank``):
    ``iterations``, ``converged``, ``seconds``, ``residuals`` (the L1 change of every iteration),
    and the ``top`` nodes of PageRank, CheiRank and 2DRank with their URLs.
``rank-density.png``
    density of nodes in the (log K, log K*) plane on 100 × 100 logarithmically equidistant cells
    (the paper's Fig. 2): colour = natural log of the count per cell, empty cells black.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from raycrawl.atomic import replacing
from raycrawl.tasks.ranks2d import RankSet

log = logging.getLogger(__name__)

COLUMNS = ("node", "url", "pagerank", "cheirank", "K", "Kstar", "K2")
UrlOf = Callable[[int], str | None]


def _urls(rs: RankSet, url_of: UrlOf | None, nodes: np.ndarray | None = None) -> list[str]:
    nodes = np.arange(rs.num_nodes) if nodes is None else nodes
    if url_of is None:
        return [""] * len(nodes)
    return [url_of(int(i)) or "" for i in nodes]


def ranks_table(rs: RankSet, url_of: UrlOf | None = None):
    """The ranks as a ``pyarrow.Table`` with the documented columns."""
    import pyarrow as pa

    n = rs.num_nodes
    return pa.table(
        {
            "node": pa.array(np.arange(n, dtype=np.int64)),
            "url": pa.array(_urls(rs, url_of), type=pa.string()),
            "pagerank": pa.array(rs.pagerank.vector),
            "cheirank": pa.array(rs.cheirank.vector),
            "K": pa.array(rs.K),
            "Kstar": pa.array(rs.Kstar),
            "K2": pa.array(rs.K2),
        }
    )


def write_parquet(rs: RankSet, out_dir: Path, url_of: UrlOf | None = None) -> Path:
    """Write ``ranks.parquet`` atomically (a crash leaves the old file or none, never half a file)."""
    import pyarrow.parquet as pq

    path = Path(out_dir) / "ranks.parquet"
    with replacing(path) as tmp:
        pq.write_table(ranks_table(rs, url_of), tmp)
    return path


def write_tsv(rs: RankSet, out_dir: Path, url_of: UrlOf | None = None) -> Path:
    """Write ``ranks.tsv``: header line, then one tab-separated row per node in node order."""
    path = Path(out_dir) / "ranks.tsv"
    urls = _urls(rs, url_of)
    # Python floats: repr gives the shortest string that round-trips (numpy scalars would print as np.float64(...)).
    p, ps = rs.pagerank.vector.tolist(), rs.cheirank.vector.tolist()
    k, ks, k2 = rs.K.tolist(), rs.Kstar.tolist(), rs.K2.tolist()
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(COLUMNS) + "\n")
        chunk = 65536
        for lo in range(0, rs.num_nodes, chunk):
            hi = min(lo + chunk, rs.num_nodes)
            f.writelines(
                f"{i}\t{_tsv_safe(urls[i])}\t{p[i]!r}\t{ps[i]!r}\t{k[i]}\t{ks[i]}\t{k2[i]}\n"
                for i in range(lo, hi)
            )
    return path


def _tsv_safe(s: str) -> str:
    # Canonical URLs never hold tabs or newlines; anything else is escaped rather than breaking rows.
    return s.replace("\t", "%09").replace("\n", "%0A").replace("\r", "%0D")


def top_nodes(rank: np.ndarray, k: int) -> np.ndarray:
    """The nodes with rank 1..k (``rank`` is a 1-based permutation)."""
    k = min(k, len(rank))
    order = np.empty(len(rank), dtype=np.int64)
    order[rank - 1] = np.arange(len(rank))
    return order[:k]


def _top_json(rs: RankSet, url_of: UrlOf | None, k: int) -> dict[str, list[dict]]:
    out = {}
    for name, rank in (("pagerank", rs.K), ("cheirank", rs.Kstar), ("2drank", rs.K2)):
        nodes = top_nodes(rank, k)
        out[name] = [
            {
                "node": int(i),
                "url": u,
                "pagerank": float(rs.pagerank.vector[i]),
                "cheirank": float(rs.cheirank.vector[i]),
                "K": int(rs.K[i]),
                "Kstar": int(rs.Kstar[i]),
                "K2": int(rs.K2[i]),
            }
            for i, u in zip(nodes, _urls(rs, url_of, nodes), strict=True)
        ]
    return out


def rank_summary(rs: RankSet, url_of: UrlOf | None = None, top: int = 20, extra: dict | None = None) -> dict:
    """The content of ``rank.json``."""

    def vec(r) -> dict:
        return {
            "iterations": r.iterations,
            "converged": r.converged,
            "seconds": round(r.seconds, 4),
            "seconds_per_iteration": r.seconds_per_iteration,
            "residuals": r.residuals,
        }

    return {
        "N": rs.num_nodes,
        "alpha": rs.alpha,
        "tol": rs.tol,
        "kappa": rs.kappa,
        "pagerank": vec(rs.pagerank),
        "cheirank": vec(rs.cheirank),
        "top": _top_json(rs, url_of, top),
        **(extra or {}),
    }


def write_json(summary: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / "rank.json"
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return path


def rank_edges(n: int, cells: int = 100) -> np.ndarray:
    """Integer rank boundaries ``1 = e_0 < … < e_m = n + 1``, log-equidistant where ranks allow: a
    cell ``[e_i, e_i+1)`` always holds at least one rank (plain ln bins leave the cells below
    rank ~cells empty, as black stripes)."""
    # 10 ** log10(n + 1) can come out a hair below n + 1 (it does with numpy 2.4), and flooring it
    # would drop the last rank from every cell: the ends are set exactly.
    inner = np.floor(np.logspace(0.0, np.log10(n + 1), cells + 1) + 1e-9).astype(np.int64)
    return np.unique(np.clip(np.concatenate(([1], inner, [n + 1])), 1, n + 1))


def density(rs: RankSet, cells: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Nodes on the (K, K*) cells of :func:`rank_edges` (rows K, columns K*), and the edges.

    K and K* are permutations, so the cells of a row hold together exactly as many nodes as the
    row has ranks; :func:`write_density_png` divides by the cell's ranks², giving the paper's
    density ``W(K, K*) = dN / dK dK*`` (Zhirov, Zhirov & Shepelyansky 2010, Fig. 2)."""
    edges = rank_edges(max(rs.num_nodes, 1), cells)
    h, _, _ = np.histogram2d(rs.K, rs.Kstar, bins=[edges - 0.5, edges - 0.5])
    return h, edges


def tie_groups(values: np.ndarray, ranks: np.ndarray, min_size: int) -> list[tuple[int, int, int]]:
    """(size, lowest rank, highest rank) of each group of at least ``min_size`` nodes with equal
    ``values``, largest first: ties are ranked by node id, so such a group fills a band of ranks in
    an order unrelated to the graph."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return []
    keys = np.round(v / max(float(v.max()), 1e-300), 12)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out = []
    for g in np.argsort(-counts, kind="stable"):
        if counts[g] < min_size:
            break
        members = ranks[inverse == g]
        out.append((int(counts[g]), int(members.min()), int(members.max())))
    return out


def write_density_png(rs: RankSet, out_dir: Path, title: str = "", cells: int = 100) -> Path:
    """The density ``W(K, K*)`` on (ln K, ln K*) axes (paper Fig. 2) as ``rank-density.png``, with
    the largest groups of tied PageRank or CheiRank values named under it (they make bands)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h, edges = density(rs, cells)
    width = np.diff(edges).astype(np.float64)
    w = h / np.outer(width, width)
    logw = np.full(h.shape, np.nan)
    nz = h > 0
    logw[nz] = np.log(w[nz])
    ln = np.log(edges.astype(np.float64))
    fig, ax = plt.subplots(figsize=(5.5, 5.0), dpi=110)
    ax.set_facecolor("black")
    cmap = plt.get_cmap("inferno").with_extremes(bad="black")
    mesh = ax.pcolormesh(ln, ln, np.ma.masked_invalid(logw.T), cmap=cmap, shading="flat")
    fig.colorbar(mesh, ax=ax, label="ln W(K, K*)  (nodes per rank²)")
    ax.set_xlim(ln[0], ln[-1])
    ax.set_ylim(ln[0], ln[-1])
    ax.set_xlabel("ln K (PageRank index)")
    ax.set_ylabel("ln K* (CheiRank index)")
    ax.set_title(title or f"N = {rs.num_nodes:,}, κ = {rs.kappa:.3f}", fontsize=10)
    notes = []
    for name, vec, ranks, axis, line in (("PageRank", rs.pagerank.vector, rs.K, "K", ax.axvline),
                                         ("CheiRank", rs.cheirank.vector, rs.Kstar, "K*", ax.axhline)):
        for size, lo, hi in tie_groups(vec, ranks, max(20, rs.num_nodes // 100))[:3]:
            notes.append(f"{size:,} nodes share one {name} value ({axis} {lo:,}–{hi:,})")
            for r in (lo - 0.5, hi + 0.5):  # the band's edges, dotted
                line(np.log(r), color="white", lw=0.5, ls=":", alpha=0.6)
    if notes:  # tied nodes are ranked by node id: their K or K* says nothing, whence the bands
        fig.text(0.02, 0.01, "Ties, ranked by node id (dotted): " + "; ".join(notes), fontsize=7, wrap=True,
                 va="bottom")
        fig.subplots_adjust(bottom=0.2)
    path = Path(out_dir) / "rank-density.png"
    with replacing(path) as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    plt.close(fig)
    return path


def format_top(rs: RankSet, url_of: UrlOf | None = None, k: int = 10) -> str:
    """Human-readable top-k listings of PageRank, CheiRank and 2DRank (with URLs when known)."""
    lines = []
    for name, rank, vec in (
        ("PageRank", rs.K, rs.pagerank.vector),
        ("CheiRank", rs.Kstar, rs.cheirank.vector),
        ("2DRank", rs.K2, None),
    ):
        lines.append(f"top {min(k, rs.num_nodes)} by {name}:")
        nodes = top_nodes(rank, k)
        for pos, (i, u) in enumerate(zip(nodes, _urls(rs, url_of, nodes), strict=True), 1):
            score = f"{vec[i]:.6g}" if vec is not None else f"K={rs.K[i]} K*={rs.Kstar[i]}"
            lines.append(f"  {pos:>3}  {i:>9}  {score:<22} {u}".rstrip())
    return "\n".join(lines)
