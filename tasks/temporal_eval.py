"""Evaluating temporal search (seed 003 part 3) on an evolving websim whose generator knows what
each page is about and which pages changed: NDCG@k, MRR and recall@k of each ranking method.

Two gradings for a query term q between epochs e1 < e2:

* **topic** (:func:`topic_grades`, from :func:`websim_topics`) — what the rankers do not see:
  websim draws a page's words from its *topic* (a disjoint block of the vocabulary, plus background
  words), and q belongs to one topic's block. Grade 2: the page is on q's topic and its epoch-e2
  text has q; grade 1: on q's topic without q (what following links can find); 0 otherwise, off-
  topic pages that happen to contain q included. The judges of the paper judged relevance to the
  query's subject; the generator's latent topic stands in for them.
* **change** (:func:`grades_for`, from :func:`websim_truth`) — grade 2 when the page has q and
  websim changed it in (e1, e2] (an edit, a link added or removed, or the page is new), 1 when it
  has q but did not change. Circular for the change-based rankers (their change score is computed
  from the same edits), so it measures finding changed pages; kept for continuity.

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


def websim_topics(hosts: int, ips: int, seed: int, epoch: int, pages_per_host_mean: float, port: int,
                  ) -> tuple[dict[str, int], dict[str, int]]:
    """({URL: its page's topic} of websim's live HTML pages at ``epoch``, {stem: the topic whose
    vocabulary block gives it}) — the generator's latent variables, from the model. A stem that
    words of two topics (or a background word) share has no topic."""
    from raycrawl.text import terms
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    model = WebModel.generate(hosts=hosts, ips=ips, seed=seed, epoch=epoch, pages_per_host_mean=pages_per_host_mean)
    r = Renderer(model, port=port)
    page_topic = {r.url(host.name, page.path): page.topic for host, page in model.live_html_pages()}
    owners: dict[str, set[int]] = {}
    for topic, words in enumerate(model.vocab.topic_words):
        for stem in terms(" ".join(words)):
            owners.setdefault(stem, set()).add(topic)
    for stem in terms(" ".join(model.vocab.background)):
        owners.setdefault(stem, set()).add(-1)
    return page_topic, {stem: next(iter(ts)) for stem, ts in owners.items() if len(ts) == 1 and -1 not in ts}


def topic_grades(term: str, having: Mapping[str, set[str]], page_topic: Mapping[str, int],
                 term_topic: Mapping[str, int]) -> dict[str, int]:
    """Topic grading (module docstring): 2 on q's topic with q, 1 on q's topic without it."""
    topic = term_topic[term]
    with_term = having.get(term, set())
    return {u: 2 if u in with_term else 1 for u, t in page_topic.items() if t == topic}
