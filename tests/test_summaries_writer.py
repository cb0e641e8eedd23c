"""Summary writer: per-agent spill files fed through the Ray actor, merged by the finishing pass."""

from __future__ import annotations

from collections import Counter

from raycrawl import text
from raycrawl.actors.visit.summary_writer import SummaryWriter, document_counts
from raycrawl.storage.summaries import SummaryArchive

PAGES = [(f"http://h{i % 3}.test/p{i}",
          f"<html><body><h1>Page {i}</h1><p>{'apple banana ' * (i % 4)} cherry number{i % 5} "
          f"the and of <b>durian</b></p><script>var hidden = {i};</script></body></html>")
         for i in range(60)]


def test_document_counts_use_the_text_pipeline():
    html = PAGES[7][1]
    length, counts = document_counts(text.visible_text(html))
    assert counts == dict(Counter(text.terms(html)))
    assert list(counts) == list(Counter(text.terms(html)))  # (each word stemmed once: the same order too)
    assert length == len(text.tokens(text.visible_text(html)))  # stopwords count in ℓ, not in terms
    assert "hidden" not in counts and "the" not in counts
    assert document_counts("") == (0, {})
    assert document_counts(text.visible_text(b"<p>broken <b>markup")) == (2, {"broken": 1, "markup": 1})


def test_two_agents_spill_then_finish(tmp_path):
    """Two agents' writers (each in its agent's parsing worker, actors/visit/parsing_worker.py) spill
    half the pages each; the finishing pass reads both spills."""
    agents = [SummaryWriter(tmp_path, f"agent{k}", 8) for k in range(2)]
    texts = [(url, text.visible_text(html)) for url, html in PAGES]  # as the parser hands them over
    assert sum(agents[k].add_pages(texts[k::2]) for k in range(2)) == len(PAGES)
    assert [a.flush() for a in agents] == [30, 30]
    for a in agents:
        a.close()
    urls = sorted(u for u, _ in PAGES) + ["http://h0.test/unfetched"]
    urls.sort()
    index = {u: i for i, u in enumerate(urls)}
    props = SummaryWriter(tmp_path, "finisher").finish(index.get, len(urls), min_df=10)
    a = SummaryArchive.open(tmp_path)
    assert props["documents"] == len(PAGES) and a.get(index["http://h0.test/unfetched"]) is None
    df = Counter(t for _, html in PAGES for t in set(text.terms(html)))
    kept = {t for t, d in df.items() if d >= 10}
    assert set(a.terms) == kept
    for url, html in PAGES:
        assert a.get_terms(index[url]) == {t: c for t, c in Counter(text.terms(html)).items() if t in kept}


def test_term_counts_are_the_stems_counted_whatever_the_stem_cache_holds(monkeypatch):
    """The stem cache (emptied past its bound, here 5 words) never changes a page's counts."""
    monkeypatch.setattr(text, "_STEMS_MAX", 5)
    monkeypatch.setattr(text, "_STEMS", {})
    for _, html in PAGES * 2:
        words = text.tokens(text.visible_text(html))
        want = Counter(text.stems(words))
        got = text.term_counts(words)
        assert got == dict(want) and list(got) == list(want)
    assert 0 < len(text._STEMS) <= 5 + max(len(set(text.tokens(text.visible_text(h)))) for _, h in PAGES)
