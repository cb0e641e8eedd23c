"""Focused-crawl simulation: replay a crawl over the stored graph and summaries (seed 000, §1).

No network: "fetching" node v means looking up its successors in the graph and its summary in
the archive. A Mercator frontier (:class:`policies.frontier_policy.MercatorFrontier`: priority
front queues chosen with a randomised bias, per-host back queues, simulated politeness) decides
the order; a :class:`policies.focus.FocusPolicy` — the object ``raycrawl crawl --focus`` runs —
decides priorities:

* ``bfs`` — one front queue: breadth-first, the crawl order of a generic crawler;
* ``best-first`` — a discovered link gets the level of the page it was first found on, i.e. the
  classifier score of that (already fetched) page quantised to ``levels`` levels.

A node keeps the level of its first discovery, as a URL does in the live crawler's sieve. The
harvest rate after t pages is (relevant pages among the first t) / t, measured with the ground
truth of the :class:`tasks.relevance.Relevance`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from raycrawl.errors import UserError
from raycrawl.policies.focus import POLICIES, FocusPolicy
from raycrawl.policies.front_queues import DEFAULT_BIAS
from raycrawl.policies.frontier_policy import MercatorFrontier
from raycrawl.tasks.relevance import Relevance

log = logging.getLogger(__name__)

__all__ = ["POLICIES", "Collection", "Curve", "focus_policy", "simulate"]


@dataclass
class Collection:
    """What a simulation replays: the graph (CSR successors) and the host of every node."""

    indptr: np.ndarray
    indices: np.ndarray
    host: np.ndarray  # host id per node
    url_of: Callable[[int], str] | None = None
    id_of: Callable[[str], int | None] | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1


@dataclass
class Curve:
    """Harvest over time of one simulated crawl."""

    policy: str
    pages: np.ndarray       # pages fetched at each checkpoint
    relevant: np.ndarray    # relevant pages among them
    sim_time: np.ndarray    # simulated clock at each checkpoint
    elapsed_s: float
    info: dict = field(default_factory=dict)
    focus: FocusPolicy | None = None  # the policy replayed (what ``crawl --focus`` runs)

    @property
    def harvest_rate(self) -> np.ndarray:
        return self.relevant / np.maximum(self.pages, 1)

    @property
    def fetched(self) -> int:
        return int(self.pages[-1]) if len(self.pages) else 0

    @property
    def pages_per_minute(self) -> float:
        return 60.0 * self.fetched / max(self.elapsed_s, 1e-9)


def focus_policy(rel: Relevance, policy: str, levels: int = 10, bias: float = DEFAULT_BIAS) -> FocusPolicy:
    """The focus policy ``policy`` over ``rel``'s classifier."""
    if policy not in POLICIES:
        raise UserError(f"unknown policy {policy!r} (use {', '.join(POLICIES)})")
    if rel.classifier is None:
        raise UserError("this relevance has no classifier a crawl could run")
    return FocusPolicy(policy, levels, rel.classifier, rel.spec, bias, {"trained": rel.info})


def simulate(coll: Collection, rel: Relevance, policy: str | FocusPolicy, budget: int, seeds: list[int], *,
             levels: int = 10, bias: float = DEFAULT_BIAS, back_queues: int = 64, delay: float = 4.0,
             checkpoints: int = 200, trace: list | None = None, seed: int = 0) -> Curve:
    """Replay ``budget`` fetches from ``seeds`` with ``policy`` (a name: built over ``rel``'s
    classifier with ``levels`` and ``bias``); returns the harvest curve.

    ``trace``, if a list, receives (node, simulated time the fetch ended) for every fetch.
    """
    fp = policy if isinstance(policy, FocusPolicy) else focus_policy(rel, policy, levels, bias)
    if budget < 1:
        raise UserError("--budget must be ≥ 1")
    if not seeds:
        raise UserError("no seed nodes to start from")
    n = coll.num_nodes
    assert len(rel.truth) == n == len(rel.score) == len(coll.host)
    t0 = time.perf_counter()
    # Level a fetched page passes on to its links (read only after the page is fetched).
    level_of = fp.link_levels(rel.score).tolist()
    truth = rel.truth.tolist()
    indptr = coll.indptr.tolist()
    indices = coll.indices
    frontier = MercatorFrontier(coll.host.tolist(), fp.levels, back_queues, delay, bias=fp.bias, seed=seed)
    seen = [False] * n  # discovered: a node keeps its first level (the sieve's rule)
    for s in seeds:
        if not seen[s]:
            seen[s] = True
            frontier.add(s, fp.seed_level)
    every = max(1, budget // checkpoints)
    pages, relevant, clock = [], [], []
    fetched = hits = 0
    while fetched < budget:
        v = frontier.next()
        if v is None:
            break
        fetched += 1
        hits += truth[v]
        if trace is not None:
            trace.append((v, frontier.now))
        if fetched % every == 0:
            pages.append(fetched)
            relevant.append(hits)
            clock.append(frontier.now)
        lvl = level_of[v]
        for w in indices[indptr[v] : indptr[v + 1]].tolist():
            if not seen[w]:
                seen[w] = True
                frontier.add(w, lvl)
    if not pages or pages[-1] != fetched:
        pages.append(fetched)
        relevant.append(hits)
        clock.append(frontier.now)
    elapsed = time.perf_counter() - t0
    if fetched < budget:
        log.info("%s: frontier exhausted after %d pages (budget %d)", fp.policy, fetched, budget)
    return Curve(fp.policy, np.array(pages), np.array(relevant), np.array(clock), elapsed,
                 {"budget": budget, "seeds": len(seeds), "levels": fp.levels, "bias": fp.bias,
                  "back_queues": back_queues, "delay": delay}, fp)


# -- loading a crawl ---------------------------------------------------------------------------------


def load_collection(crawl_dir: Path) -> Collection:
    """The crawl's graph (``DIR/graph/`` BV graph if present, else the link records) and hosts."""
    from raycrawl.storage.crawl_graph import graph_paths, node_map
    from raycrawl.urls import host_of

    id_of, url_of, n, source = node_map(crawl_dir)
    indptr = indices = None
    bv = graph_paths(crawl_dir)["graph"]
    if Path(f"{bv}.properties").exists():
        from raycrawl.storage.bvgraph import BVGraph

        g = BVGraph.load(bv)
        if g.num_nodes == n:
            indptr, indices = g.to_csr()
        else:
            log.warning("graph has %d nodes, URL map %d: rebuilding arcs from link records", g.num_nodes, n)
    if indptr is None:
        from raycrawl.storage.link_records import iter_link_records

        src, dst = [], []
        for rec in iter_link_records(crawl_dir):
            v = id_of(rec.url)
            if v is None:
                continue
            targets = list(rec.links)
            if rec.redirect:
                targets.append(rec.redirect)
            for u in targets:
                w = id_of(u)
                if w is not None:
                    src.append(v)
                    dst.append(w)
        src_a, dst_a = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        order = np.lexsort((dst_a, src_a))
        indices = dst_a[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src_a, minlength=n), out=indptr[1:])
    hosts: dict[str, int] = {}
    host = np.array([hosts.setdefault(host_of(url_of(i)) or "", len(hosts)) for i in range(n)], dtype=np.int64)
    log.info("collection: %d nodes, %d arcs, %d hosts (%s)", n, len(indices), len(hosts), source)
    return Collection(np.asarray(indptr, np.int64), np.asarray(indices, np.int64), host, url_of, id_of)


def default_seeds(crawl_dir: Path, coll: Collection, k: int = 5) -> list[int]:
    """The first ``k`` URLs the crawl fetched (its seeds come first)."""
    from raycrawl.storage.link_records import iter_link_records

    seeds: list[int] = []
    for rec in iter_link_records(crawl_dir):
        v = coll.id_of(rec.url)
        if v is not None and v not in seeds:
            seeds.append(v)
            if len(seeds) == k:
                break
    return seeds


def read_labels(path: Path, coll: Collection) -> np.ndarray:
    """Per-node labels from a ``url<TAB>label`` file, or page topics (names) from a websim
    manifest (``manifest.jsonl.gz`` or the websim output dir holding it); unknown URLs ignored."""
    labels = np.full(coll.num_nodes, None, dtype=object)
    for url, label in read_url_labels(path).items():
        v = coll.id_of(url)
        if v is not None:
            labels[v] = label
    return labels


def read_url_labels(path: Path) -> dict[str, str]:
    """URL → label from a ``url<TAB>label`` file or a websim manifest (page topic names)."""
    path = Path(path)
    if path.is_dir() or path.name.endswith(".jsonl.gz"):
        from raycrawl.websim.manifest import load_manifest

        try:
            m = load_manifest(path)
        except (OSError, ValueError) as exc:
            raise UserError(f"--truth {path}: not a readable websim manifest ({exc})") from None
        topics = m.meta.get("topics") or []
        return {url: topics[rec["topic"]] for url, rec in m.pages.items()
                if rec.get("topic") is not None and rec["topic"] < len(topics)}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"--truth {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"--truth {path}: not a UTF-8 url<TAB>label file (a binary file?)") from None
    pairs = [line.rstrip("\n").partition("\t") for line in lines]
    if not any(sep for _, sep, _ in pairs):
        raise UserError(f"--truth {path}: no url<TAB>label lines")
    return {url: label for url, sep, label in pairs if sep}


# -- reporting ---------------------------------------------------------------------------------------


def write_results(curves: list[Curve], rel: Relevance, out_dir: Path, title: str = "") -> dict:
    """``harvest.tsv``, ``harvest.json``, ``harvest.png`` (matplotlib Agg) and each policy's
    model, ``<policy>.focus.json`` (what ``raycrawl crawl --focus`` runs), in ``out_dir``."""
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    for c in curves:
        if c.focus is not None:
            c.focus.save(out_dir / f"{c.policy}.focus.json")
    with open(out_dir / "harvest.tsv", "w") as f:
        f.write("policy\tpages\trelevant\tharvest_rate\tsim_time\n")
        for c in curves:
            for p, r, h, t in zip(c.pages.tolist(), c.relevant.tolist(), c.harvest_rate.tolist(),
                                  c.sim_time.tolist(), strict=True):
                f.write(f"{c.policy}\t{p}\t{r}\t{h:.6f}\t{t:.1f}\n")
    summary = {
        "relevance": rel.spec,
        "relevance_info": rel.info,
        "policies": {c.policy: {"fetched": c.fetched, "relevant": int(c.relevant[-1]),
                                "harvest_rate": float(c.harvest_rate[-1]),
                                "mean_harvest_rate": float(c.harvest_rate.mean()),
                                "replay_pages_per_minute": c.pages_per_minute, **c.info,
                                "model": f"{c.policy}.focus.json" if c.focus is not None else None}
                     for c in curves},
    }
    (out_dir / "harvest.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_harvest([(c.policy, c.pages, c.harvest_rate) for c in curves], out_dir / "harvest.png",
                 title or f"focused-crawl simulation: {rel.spec}")
    return summary


def plot_harvest(curves: list[tuple[str, np.ndarray, np.ndarray]], path: Path, title: str) -> None:
    """Harvest rate against pages fetched, one line per (label, pages, rate): the simulator's plot,
    and the live crawl's (``DIR/focus/harvest.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, pages, rate in curves:
        ax.plot(pages, rate, label=f"{label} (final {rate[-1]:.3f})" if len(rate) else label)
    ax.set_xlabel("pages fetched")
    ax.set_ylabel("harvest rate (relevant / fetched)")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_summary(summary: dict) -> str:
    lines = [f"relevance {summary['relevance']}: {summary['relevance_info']}"]
    for name, p in summary["policies"].items():
        lines.append(f"{name:>10}: {p['fetched']} pages, {p['relevant']} relevant, harvest {p['harvest_rate']:.3f} "
                     f"(mean over time {p['mean_harvest_rate']:.3f}), {p['replay_pages_per_minute']:,.0f} pages/min")
    return "\n".join(lines)


# -- an in-vitro collection straight from the websim model (ground-truth topics) ----------------------


def websim_corpus(model, renderer=None) -> tuple[Collection, list[dict], np.ndarray]:
    """(collection, document records, topic label per node) of a :class:`websim.model.WebModel`.

    Nodes are the model's HTML pages, numbered in URL sort-key order like a crawl's graph; arcs
    are their links to other HTML pages; records hold each page's visible words counted through
    the text pipeline (ready for :func:`storage.summaries.build_archive`); labels are the pages'
    topic names — the relevance ground truth websim knows and a crawl does not.
    """
    from collections import Counter

    from raycrawl import text
    from raycrawl.websim.render import Renderer

    try:
        from raycrawl.storage.urlmap import url_sort_key
    except ImportError:
        url_sort_key = None
    renderer = renderer or Renderer(model, 80)
    pages = [(h, p) for h in model.hosts for p in h.pages.values() if p.kind == "html"]
    urls = [f"http://{h.name}{p.path}" for h, p in pages]
    order = sorted(range(len(urls)), key=(lambda i: url_sort_key(urls[i])) if url_sort_key else urls.__getitem__)
    node_of = {(pages[i][0].name, pages[i][1].path): v for v, i in enumerate(order)}
    n = len(order)
    hosts: dict[str, int] = {}
    host = np.empty(n, np.int64)
    labels = np.empty(n, dtype=object)
    src, dst, records = [], [], []
    for v, i in enumerate(order):
        h, p = pages[i]
        host[v] = hosts.setdefault(h.name, len(hosts))
        labels[v] = model.vocab.topic_name(p.topic)
        for target in p.links:
            w = node_of.get(target)
            if w is not None:
                src.append(v)
                dst.append(w)
        words = renderer.words(h, p)
        records.append({"url": urls[i], "length": len(words),
                        "terms": dict(Counter(text.stems(words)))})
    src_a, dst_a = np.array(src, np.int64), np.array(dst, np.int64)
    o = np.lexsort((dst_a, src_a))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src_a, minlength=n), out=indptr[1:])
    index = {urls[i]: v for v, i in enumerate(order)}
    coll = Collection(indptr, dst_a[o], host, lambda v: urls[order[v]], index.get)
    return coll, records, labels


def websim_seeds(model, coll: Collection) -> list[int]:
    return [v for v in (coll.id_of(f"http://{h}{p}") for h, p in model.seeds()) if v is not None]
