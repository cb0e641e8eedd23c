"""Near-duplicate detection on websim's ground truth: its manifest's duplicate clusters (exact
copies and mirrors with small edits) against near-misses (heavier edits, not duplicates).

Pages are rendered by websim's own renderer (no HTTP needed for the content itself) and go through
the same ``visible_text`` the crawler uses. Done means precision ≥ 0.95 and recall ≥ 0.95 of
duplicate pairs at the default threshold, for the crawl-time index (estimated Jaccard), for
post-crawl clustering, and for the exact-Jaccard classifier they are compared with.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from raycrawl.actors.visit.shingler import NearDupIndex
from raycrawl.tasks.dedup import UnionFind, cluster_texts, exact_jaccard_pairs, pair_metrics
from raycrawl.text import visible_text

pytestmark = pytest.mark.slow  # ~30 s: renders a 300-host web (≈ 6,000 pages), checks it four ways


def _pairs(groups):
    return {tuple(sorted(p)) for g in groups for p in combinations(g, 2)}


@pytest.fixture(scope="module")
def web():
    from raycrawl.websim.manifest import build_records
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    model = WebModel.generate(hosts=300, ips=20, seed=7)
    renderer = Renderer(model, 8080)
    records = build_records(model, renderer)
    urls, texts = [], []
    for host in model.hosts:  # host order: originals come before their mirrors, as in a crawl
        for page in host.pages.values():
            if page.kind == "html" and page.removed_in is None:
                urls.append(renderer.url(host.name, page.path))
                texts.append(visible_text(renderer.html(host, page)))
    index = {u: i for i, u in enumerate(urls)}
    uf = UnionFind(len(urls))
    near_miss = []
    for c in (r for r in records if r["type"] == "cluster"):
        members = [index[u] for u in c["urls"] if u in index]
        if c["kind"] == "near_miss":
            near_miss.append(members)
        else:
            for m in members[1:]:
                uf.union(members[0], m)
    truth = _pairs(uf.groups().values())
    return urls, texts, truth, _pairs(near_miss)


def _check(name, predicted, truth, misses):
    m = pair_metrics(predicted, truth)
    assert m["true_pairs"] > 100 and len(misses) > 30
    assert not predicted & misses or len(predicted & misses) / len(predicted) < 0.05, name
    assert m["precision"] >= 0.95 and m["recall"] >= 0.95, (name, m)
    return m


def test_crawl_time_index_on_websim(web):
    urls, texts, truth, misses = web
    index = NearDupIndex()  # crawl-time defaults: 512 permutations × 8 bits, threshold 0.9
    reps = []
    for s in range(0, len(urls), 100):
        reps += index.check_and_add(list(zip(urls[s : s + 100], texts[s : s + 100], strict=True)))
    pos = {u: i for i, u in enumerate(urls)}
    uf = UnionFind(len(urls))
    for i, rep in enumerate(reps):
        if rep is not None:
            uf.union(i, pos[rep])
    _check("crawl-time", _pairs(uf.groups().values()), truth, misses)


def test_post_crawl_and_exact_jaccard_on_websim(web):
    urls, texts, truth, misses = web
    docs = list(zip(urls, texts, strict=True))
    # Default: LSH candidates from 128-permutation sketches, confirmed by exact Jaccard.
    m = _check("post-crawl", cluster_texts(docs).pair_set(), truth, misses)
    # Sketch-only confirmation needs the crawl-time sharpness (512 permutations) to pass.
    _check("post-crawl estimate", cluster_texts(docs, num_perm=512, confirm="estimate").pair_set(), truth, misses)
    exact = UnionFind(len(urls))
    for (a, b), j in exact_jaccard_pairs(texts).items():
        if j >= 0.9:
            exact.union(a, b)
    m_exact = _check("exact Jaccard", _pairs(exact.groups().values()), truth, misses)
    assert m["recall"] <= m_exact["recall"] + 0.02  # the estimate cannot beat exact by more than noise
