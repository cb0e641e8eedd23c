"""Ranking a graph (docs/ranking.md): read a BV graph, compute PageRank, CheiRank, 2DRank and κ
(single process or distributed Ray tasks), optionally personalised, HITS and the spectrum, and write
``ranks.parquet``, ``rank.json``, ``rank-density.png`` (``ranks.tsv``). ``raycrawl rank`` is the
command over it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

from raycrawl.errors import UserError

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Inputs


def load_graph(basename: str | Path):
    """The ``LinkMatrix`` of a BV graph. Raises UserError if it is missing or corrupt."""
    from raycrawl.storage.bvgraph import BVGraph
    from raycrawl.tasks.pagerank import LinkMatrix

    basename = str(basename)
    if not Path(basename + ".properties").exists():
        raise UserError(f"no BV graph at {basename} ({basename}.properties not found)")
    g = BVGraph.load(basename)
    try:
        indptr, indices = g.to_csr()
    except (ValueError, IndexError) as e:  # a decoder that ran off the end of a corrupt stream
        raise UserError(f"{basename}: corrupt graph ({e})") from e
    if len(indptr) != g.num_nodes + 1 or indptr[-1] != len(indices):
        raise UserError(f"{basename}: corrupt graph (decoded structure does not match its properties)")
    return LinkMatrix.from_successors(indptr, indices)


URLMAP_NAME = "urls.map"  # storage.crawl_graph.URLMAP: the crawl graph's URL map, next to bv.*


def url_lookup(
    basename: str | Path, num_nodes: int
) -> tuple[Callable[[int], str | None] | None, Callable[[str], int | None] | None]:
    """``(url_of, id_of)`` from the URL map next to a graph (``urls.map`` in its directory, or
    ``BASENAME.urls.map``), or ``(None, None)`` when there is none. A map whose size differs from the
    graph's is ignored with a warning (it would name the wrong nodes). A corrupt map is a UserError."""
    from raycrawl.storage.urlmap import UrlMap

    for path in (Path(basename).parent / URLMAP_NAME, Path(str(basename) + "." + URLMAP_NAME)):
        if not path.exists():
            continue
        m = UrlMap.open(path)
        if len(m) != num_nodes:
            log.warning("%s has %d URLs but the graph %d nodes: ranking without URLs", path, len(m), num_nodes)
            return None, None

        def id_of(url: str, m=m) -> int | None:
            i = m.id_of(url)
            return i if i >= 0 else None

        return m.url_of, id_of
    return None, None


_LINE = re.compile(r"^(\S+)(?:\s+(\S+))?\s*$")
_COMMENT = re.compile(r"(^|\s)#.*$")  # '#' starts a comment only at a word start (URLs keep theirs)


def read_personalization(path: Path, n: int, id_of: Callable[[str], int | None] | None = None):
    """The personalization vector from FILE (lines ``NODE_OR_URL [WEIGHT]``). Raises UserError on bad input."""
    import numpy as np

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read personalization file {path}: {e}") from e
    p = np.zeros(n)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise UserError(f"{path}:{lineno}: expected 'NODE_OR_URL [WEIGHT]', got {raw!r}")
        key, weight = m.group(1), m.group(2)
        try:
            w = float(weight) if weight is not None else 1.0
        except ValueError:
            raise UserError(f"{path}:{lineno}: weight {weight!r} is not a number") from None
        if not np.isfinite(w) or w < 0:
            raise UserError(f"{path}:{lineno}: weight must be finite and >= 0, got {weight}")
        if key.isdigit():
            node = int(key)
        else:
            from raycrawl.urls import canonicalize

            node = id_of(canonicalize(key) or key) if id_of is not None else None
            if node is None:
                raise UserError(f"{path}:{lineno}: URL {key!r} is not in the graph's URL map"
                                if id_of is not None else f"{path}:{lineno}: {key!r} is not a node id "
                                "(and the graph has no URL map)")
        if not 0 <= node < n:
            raise UserError(f"{path}:{lineno}: node {node} out of range [0, {n})")
        p[node] += w
    if p.sum() <= 0:
        raise UserError(f"{path}: the personalization has no positive weight")
    return p


# ---------------------------------------------------------------------------------------------
# Running


def run_rank(
    basename: Path,
    out_dir: Path,
    *,
    alpha: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 1000,
    personalize: Path | None = None,
    fmt: str = "parquet",
    distributed: bool = False,
    blocks: int = 2,
    address: str | None = None,
    threads: int | None = None,
    hits: float | None = None,
    spectrum: int = 0,
    arnoldi_dim: int | None = None,
    top: int = 10,
    png: bool = True,
) -> tuple[object, dict, Callable[[int], str | None] | None]:
    """Rank the graph at ``basename``; write all outputs to ``out_dir``. Returns ``(RankSet, summary, url_of)``."""
    from raycrawl.tasks import rank_output
    from raycrawl.tasks.ranks2d import compute_ranks

    if not 0.0 < alpha < 1.0:
        raise UserError(f"--alpha must be in (0, 1), got {alpha}")
    if not tol > 0:
        raise UserError(f"--tol must be > 0, got {tol}")
    if max_iter < 1 or blocks < 1 or top < 0 or spectrum < 0 or (threads is not None and threads < 1):
        raise UserError("--max-iter, --blocks and --threads must be >= 1, --top and --spectrum >= 0")
    if arnoldi_dim is not None and arnoldi_dim < max(2, 2 * spectrum):
        raise UserError(f"--arnoldi-dim must be >= 2 x --spectrum ({2 * spectrum}), got {arnoldi_dim}")
    t0 = time.perf_counter()
    matrix = load_graph(basename)
    load_s = time.perf_counter() - t0
    url_of, id_of = url_lookup(basename, matrix.num_nodes)
    pers = read_personalization(personalize, matrix.num_nodes, id_of) if personalize else None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {out_dir}: {e.strerror or e}") from e

    started_ray = False
    if distributed:
        from raycrawl.ray_start import start_ray

        started_ray = start_ray(address, num_cpus=max(1, min(blocks, 2)))
    try:
        rs = compute_ranks(matrix, alpha=alpha, tol=tol, max_iter=max_iter, personalization=pers,
                           distributed=distributed, num_blocks=blocks, threads=threads)
    finally:
        if started_ray:
            from raycrawl.ray_start import stop_ray

            stop_ray()
    extra: dict = {
        "graph": str(basename),
        "arcs": matrix.num_arcs,
        "dangling": len(matrix.dangling),
        "personalized": pers is not None,
        "distributed": distributed,
        "blocks": blocks if distributed else 1,
        "load_seconds": round(load_s, 3),
    }
    table_extra = {}
    if hits is not None:
        from raycrawl.tasks.hits import personalized_hits

        h = personalized_hits(matrix, c=hits, personalization=pers)
        extra["hits"] = {"c": hits, "iterations": h.iterations, "converged": h.converged}
        table_extra = {"authority": h.authority, "hub": h.hub}
    if spectrum:
        from raycrawl.tasks.spectrum import DEFAULT_ARNOLDI_DIM, google_spectrum

        n_a = arnoldi_dim or DEFAULT_ARNOLDI_DIM
        # G and G* (the reversed graph's Google matrix), as the paper shows both (its Figs. 9, 10)
        extra["spectrum"] = google_spectrum(matrix, k=spectrum, n_arnoldi=n_a).as_dict(top=spectrum)
        extra["spectrum_star"] = google_spectrum(matrix.reversed(), k=spectrum, n_arnoldi=n_a).as_dict(top=spectrum)
    summary = rank_output.rank_summary(rs, url_of, top=max(top, 20), extra=extra)
    if table_extra:
        _write_parquet_with(rs, out_dir, url_of, table_extra)
    else:
        rank_output.write_parquet(rs, out_dir, url_of)
    if fmt == "tsv":
        rank_output.write_tsv(rs, out_dir, url_of)
    rank_output.write_json(summary, out_dir)
    if png:
        rank_output.write_density_png(rs, out_dir, title=f"{Path(basename).name}: N={rs.num_nodes:,} κ={rs.kappa:.3f}")
    return rs, summary, url_of


def _write_parquet_with(rs, out_dir: Path, url_of, columns: dict) -> None:

    import pyarrow as pa
    import pyarrow.parquet as pq

    from raycrawl.atomic import replacing
    from raycrawl.tasks.rank_output import ranks_table

    table = ranks_table(rs, url_of)
    for name, values in columns.items():
        table = table.append_column(name, pa.array(values))
    path = out_dir / "ranks.parquet"
    with replacing(path) as tmp:
        pq.write_table(table, tmp)
