"""Evaluating temporal search (seed 003 part 3) on an evolving websim whose ground truth says which
pages changed: NDCG@k, MRR and recall@k of each ranking method.

Ground truth for a query term q between epochs e1 < e2 (:func:`websim_truth`): a page is
**relevant (grade 2)** when its epoch-e2 text contains q and websim changed it in (e1, e2] (an
edit, a link added or removed, or the page is new) — what temporal search is for, "what happened
about q between the snapshots"; **grade 1** when it contains q but did not change; 0 otherwise.

* NDCG@k: Σ_{i≤k} (2^{g_i} − 1) / log2(i + 1), divided by the same sum over the ideal order of
  all graded pages (Järvelin and Kekäläinen's gains, as ``sklearn.metrics.ndcg_score`` with
  exponential gains).
* MRR: 1 / rank of the first grade-2 page (0 if none in the list), averaged over queries.
* recall@k: grade-2 pages in the top k / all grade-2 pages (the paper's recall@15 has k = 15).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def dcg(gains: Sequence[float], k: int) -> float:
    return sum((2.0**g - 1) / math.log2(i + 2) for i, g in enumerate(gains[:k]))


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """NDCG@k of a ranked list of pages (unknown pages have grade 0); 0 when nothing is relevant."""
    ideal = dcg(sorted(grades.values(), reverse=True), k)
    return dcg([grades.get(p, 0) for p in ranked], k) / ideal if ideal > 0 else 0.0


def reciprocal_rank(ranked: Sequence[str], grades: Mapping[str, int], level: int = 2) -> float:
    for i, p in enumerate(ranked):
        if grades.get(p, 0) >= level:
            return 1.0 / (i + 1)
    return 0.0


def recall_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int, level: int = 2) -> float:
    relevant = {p for p, g in grades.items() if g >= level}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def websim_truth(hosts: int, ips: int, seed: int, e1: int, e2: int, pages_per_host_mean: float, port: int,
                 ) -> tuple[dict[str, set[str]], dict[str, bool]]:
    """({stem: URLs whose epoch-e2 text has it}, {URL: changed in (e1, e2]}) of websim's live HTML
    pages at e2, from the model (no server, no crawl)."""
    from raycrawl.text import terms
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    model = WebModel.generate(hosts=hosts, ips=ips, seed=seed, epoch=e2, pages_per_host_mean=pages_per_host_mean)
    r = Renderer(model, port=port)
    having: dict[str, set[str]] = {}
    changed: dict[str, bool] = {}
    for host, page in model.live_html_pages():
        url = r.url(host.name, page.path)
        changed[url] = any(e1 < e <= e2 for e in page.changed)
        for t in set(terms(r.html(host, page))):
            having.setdefault(t, set()).add(url)
    return having, changed


def grades_for(term: str, having: Mapping[str, set[str]], changed: Mapping[str, bool]) -> dict[str, int]:
    return {u: 2 if changed.get(u) else 1 for u in having.get(term, ())}
