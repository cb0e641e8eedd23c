"""The crawl graph: the graph compressor turns a crawl's link records into the URL map and BV graphs.

Graph of a crawl (the rule, applied to ``storage.link_records`` records):

* **nodes** are the URLs the crawl fetched as pages: records with a 2xx status, and redirect
  sources (a 3xx with a ``redirect`` target). Errors, 4xx/5xx responses, robots-excluded and
  never-fetched URLs are not nodes: nothing is known about their content or links.
* **arcs**: for a 2xx page, one arc per out-link whose target is a node (links to pages never
  fetched are dropped, as in WebGraph's crawls); for a redirect source, one arc to its target if
  that is a node — a redirect is a link the server made for the page. Self loops are kept,
  duplicate arcs merged. A URL recorded several times (re-crawls, epochs) gets the union of its
  records' arcs; a page rendered in a browser (``render``) gets its rendered DOM's links too, and
  the arcs only the rendered DOM has are listed in ``rendered-arcs.tsv`` (source and target ids,
  a line each: the arcs scripts made). A render that failed after the browser gave its DOM
  (``render-timeout`` while reading it) keeps that DOM's links, as the crawl followed them.

Node ids are ranks in ``url_sort_key`` order (``storage.urlmap``), so document ids elsewhere
(summaries, ranks, index) equal graph node ids. Output in ``DIR/graph/``: ``urls.map``,
``bv.{graph,offsets,properties}``, the transpose ``bv-t.*``, and ``graph.json`` (counts).

``GraphCompressor`` builds them from records fed in batches; :func:`build_crawl_graph` from a
crawl's link records after the crawl (``raycrawl graph build``), :func:`open_crawl_graph` opens the
result.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from raycrawl.storage.crawl_dir import PARTS
from raycrawl.storage.link_records import LinkRecord

log = logging.getLogger(__name__)

GRAPH_SUBDIR = PARTS["graph"]
BASENAME = "bv"
TRANSPOSE = "bv-t"
URLMAP = "urls.map"


def graph_paths(crawl_dir: str | Path) -> dict[str, Path]:
    """Where a crawl's graph files live."""
    g = Path(crawl_dir) / GRAPH_SUBDIR
    return {"dir": g, "graph": g / BASENAME, "transpose": g / TRANSPOSE, "urlmap": g / URLMAP,
            "info": g / "graph.json", "rendered": g / "rendered-arcs.tsv"}


def is_node_record(rec: LinkRecord) -> bool:
    """Whether a link record makes its URL a node (see module doc)."""
    status = rec.status
    return 200 <= status < 300 or (300 <= status < 400 and bool(rec.redirect))


def node_map(crawl_dir: Path) -> tuple[Callable[[str], int | None], Callable[[int], str], int, str]:
    """(id_of, url_of, number of nodes, source): the graph's URL map ``DIR/graph/urls.map`` when
    the graph is built, else the same node rule applied to the link records (pages fetched 2xx and
    redirect sources, ids in ``url_sort_key`` order), so ids agree with the graph built later."""
    from raycrawl.storage.urlmap import UrlMap, url_sort_key

    path = graph_paths(crawl_dir)["urlmap"]
    if path.exists():
        m = UrlMap.open(path)

        def id_of(url: str) -> int | None:
            i = m.id_of(url)
            return i if i >= 0 else None

        return id_of, m.url_of, len(m), f"graph URL map {path}"
    from raycrawl.storage.link_records import iter_link_records

    urls = {rec.url for rec in iter_link_records(crawl_dir) if is_node_record(rec)}
    ordered = sorted(urls, key=url_sort_key)
    index = {u: i for i, u in enumerate(ordered)}
    return index.get, ordered.__getitem__, len(ordered), "link records (no graph built yet)"


class GraphCompressor:
    """Accumulates link records, then writes the URL map, the graph and its transpose."""

    def __init__(self, window: int = 7, max_ref_count: int = 3, min_interval: int = 4, zeta_k: int = 3,
                 url_block_size: int | None = None) -> None:
        self.params = {"window": window, "max_ref_count": max_ref_count, "min_interval": min_interval,
                       "zeta_k": zeta_k}
        self.url_block_size = url_block_size
        self._out: dict[str, set[str]] = {}  # node URL -> candidate targets (filtered at finish)
        self._rendered: dict[str, set[str]] = {}  # node URL -> targets only its rendered DOM links to
        self.records = 0

    def add_records(self, records: Iterable[LinkRecord]) -> int:
        """Take a batch of link records; returns how many were nodes."""
        nodes = 0
        for rec in records:
            self.records += 1
            if not is_node_record(rec):
                continue
            nodes += 1
            targets = self._out.setdefault(rec.url, set())
            if rec.status < 300:
                targets.update(rec.links)
            elif rec.redirect:
                targets.add(rec.redirect)
        return nodes

    def add_rendered(self, records: Iterable[LinkRecord]) -> None:
        """Take records of rendered pages (``rendered/``, after every fetch record): a node's
        rendered DOM adds its links to the node's arcs, and those its markup lacked are listed
        apart (``rendered-arcs.tsv``)."""
        for rec in records:
            targets = self._out.get(rec.url)
            if targets is None:
                continue
            new = set(rec.links) - targets
            if new:
                targets.update(new)
                self._rendered.setdefault(rec.url, set()).update(new)

    @property
    def num_nodes(self) -> int:
        return len(self._out)

    def arcs(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(urls in id order, src ids, dst ids)`` of the graph accumulated so far."""
        from raycrawl.storage.urlmap import url_sort_key

        urls = sorted(self._out, key=url_sort_key)
        ids = {u: i for i, u in enumerate(urls)}
        src: list[int] = []
        dst: list[int] = []
        for u, targets in self._out.items():
            s = ids[u]
            for t in targets:
                d = ids.get(t)
                if d is not None:
                    src.append(s)
                    dst.append(d)
        return urls, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)

    def finish(self, crawl_dir: str | Path) -> dict[str, Any]:
        """Write ``DIR/graph/`` (see module doc) and return its summary."""
        urls, src, dst = self.arcs()
        extra: dict[str, Any] = {"records": self.records}
        if self._rendered:
            ids = {u: i for i, u in enumerate(urls)}
            rows = sorted((ids[u], ids[t]) for u, targets in self._rendered.items() for t in targets if t in ids)
            path = graph_paths(crawl_dir)["rendered"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{a}\t{b}\n" for a, b in rows))
            extra |= {"rendered_pages": len(self._rendered), "rendered_arcs": len(rows)}
        return write_graph_dir(crawl_dir, urls, src, dst, url_block_size=self.url_block_size, extra=extra, **self.params)


def write_graph_dir(crawl_dir: str | Path, urls: list[str] | None, src: np.ndarray, dst: np.ndarray, *,
                    num_nodes: int | None = None, url_block_size: int | None = None,
                    extra: dict[str, Any] | None = None, **params: int) -> dict[str, Any]:
    """Write graph, transpose and (if ``urls`` is given, in id order) URL map under
    ``crawl_dir/graph``; ``src``/``dst`` are node ids. Returns the summary (also ``graph.json``)."""
    from raycrawl.storage.bvgraph import csr_from_arcs, store, transpose_csr
    from raycrawl.storage.urlmap import DEFAULT_BLOCK_SIZE, UrlMap

    t0 = time.perf_counter()
    paths = graph_paths(crawl_dir)
    paths["dir"].mkdir(parents=True, exist_ok=True)
    n = len(urls) if urls is not None else int(num_nodes or 0)
    indptr, indices = csr_from_arcs(n, src, dst)
    fwd = store(paths["graph"], indptr, indices, **params)
    tindptr, tindices = transpose_csr(n, indptr, indices)
    bwd = store(paths["transpose"], tindptr, tindices, **params)
    info: dict[str, Any] = {"nodes": n, "arcs": int(len(indices)), "bits_per_link": float(fwd["bitsperlink"]),
                            "transpose_bits_per_link": float(bwd["bitsperlink"])}
    if urls is not None:
        m = UrlMap.build(urls, paths["urlmap"], block_size=url_block_size or DEFAULT_BLOCK_SIZE)
        if len(m) != n:
            raise ValueError("URL list has duplicates: ids would not match")
        info["urlmap_bytes_per_url"] = round(m.size_bytes / n, 3) if n else 0.0
    elif paths["urlmap"].exists():
        paths["urlmap"].unlink()  # a stale map would name the wrong nodes
    info.update(extra or {})
    info["seconds"] = round(time.perf_counter() - t0, 3)
    paths["info"].write_text(json.dumps(info, indent=2) + "\n")
    log.info("graph of %s: %d nodes, %d arcs, %.3f bits/link", crawl_dir, n, info["arcs"], info["bits_per_link"])
    return info


def open_crawl_graph(crawl_dir: str | Path):
    """``(graph, transpose, urlmap)`` of a built crawl graph; ``transpose.successors(v)`` are the
    predecessors of ``v``; ``urlmap`` is None for graphs imported without URLs. Raises
    ``UserError`` if the graph is missing or damaged."""
    from raycrawl.errors import UserError
    from raycrawl.storage.bvgraph import BVGraph
    from raycrawl.storage.urlmap import UrlMap

    paths = graph_paths(crawl_dir)
    if not Path(str(paths["graph"]) + ".properties").exists():
        raise UserError(f"{crawl_dir} has no graph: run 'raycrawl graph build {crawl_dir}' first")
    g = BVGraph.load(paths["graph"])
    t = BVGraph.load(paths["transpose"])
    m = UrlMap.open(paths["urlmap"]) if paths["urlmap"].exists() else None
    if (t.num_nodes, t.num_arcs) != (g.num_nodes, g.num_arcs) or (m is not None and len(m) != g.num_nodes):
        raise UserError(f"{paths['dir']}: graph, transpose and URL map do not match: rebuild the graph")
    return g, t, m


def build_crawl_graph(crawl_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Post-crawl build: read every link record of ``crawl_dir`` and write its graph."""
    from raycrawl.errors import UserError
    from raycrawl.storage.link_records import RENDERED_SUBDIR, iter_link_records

    gc = GraphCompressor(**kwargs)
    batch: list[LinkRecord] = []
    count = 0
    for rec in iter_link_records(crawl_dir):
        count += 1
        batch.append(rec)
        if len(batch) >= 10_000:
            gc.add_records(batch)
            batch.clear()
    if not count:
        raise UserError(f"{Path(crawl_dir) / 'links'}: no readable link record (files missing or damaged)")
    gc.add_records(batch)
    gc.add_rendered(iter_link_records(crawl_dir, RENDERED_SUBDIR))
    return gc.finish(crawl_dir)
