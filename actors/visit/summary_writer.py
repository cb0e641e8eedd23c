"""Summary writer: turns parsed pages into term counts during a crawl, then builds the archive.

The agent hands each page of the crawl (storage/crawl_pages.py) to its summary writer as the
visible text the parser extracted (``raycrawl.text.page_text``: the HTML is parsed once per page).
The writer runs the rest of the one text pipeline (:mod:`raycrawl.text`: tokens → stopwords out →
Porter stems),
counts terms per document and appends them to a temporary *spill file* under
``DIR/summaries/spill/`` — no dictionary is known yet, since terms are renumbered by collection
frequency and filtered by document frequency only once the crawl is over. The finishing pass
(:meth:`SummaryWriter.finish`, or ``raycrawl summaries build``) reads every agent's spill files
twice: term statistics first, then the archive (:func:`storage.summaries.build_archive`).

``SummaryWriter`` is plain and synchronous; it is a role of the agent's parsing worker
(actors/visit/parsing_worker.py), which hands it the texts its parser extracted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from raycrawl import text
from raycrawl.storage import summary_spill
from raycrawl.storage.crawl_dir import layout

log = logging.getLogger(__name__)


def document_counts(visible: str) -> tuple[int, dict[str, int]]:
    """(ℓ, {term: count}) of a document's visible text (``raycrawl.text.page_text``): ℓ = its
    length in words (tokens before stopword removal, as the paper's "document length in words"),
    counts over its stemmed terms."""
    return counts_of_tokens(text.tokens(visible))


def counts_of_tokens(words: list[str]) -> tuple[int, dict[str, int]]:
    """:func:`document_counts` of a text whose tokens (``raycrawl.text.tokens``) are ``words``."""
    return len(words), text.term_counts(words)


class SummaryWriter:
    """Accumulates per-document term counts of one agent into its spill file.

    Contract: :meth:`add_page` takes a page's visible text (``raycrawl.text.page_text``; an empty
    text gives ℓ = 0, s = 0); nothing is lost once :meth:`flush` returns.
    """

    def __init__(self, crawl_dir: str | Path, writer: str = "agent0", batch: int = 256,
                 on_closed: Callable[[Path], None] | None = None, elsewhere: Iterable[str] = ()) -> None:
        """``on_closed``, ``elsewhere``: as :class:`storage.summary_spill.SpillWriter`'s."""
        self.crawl_dir = Path(crawl_dir)
        self.spill = summary_spill.SpillWriter(layout(self.crawl_dir).summaries / summary_spill.SPILL_SUBDIR, writer,
                                               batch, on_closed, elsewhere)
        self.pages = 0

    def add_page(self, url: str, visible: str) -> int:
        """Count the terms of one page's visible text; returns its number of distinct terms."""
        return self.add_counts(url, *document_counts(visible))

    def add_counts(self, url: str, length: int, counts: dict[str, int], rendered: bool = False) -> int:
        """A page's :func:`document_counts`, counted already (``rendered``: of its rendered DOM);
        returns its number of distinct terms."""
        self.spill.add(url, length, counts, rendered)
        self.pages += 1
        return len(counts)

    def add_pages(self, pages: Iterable[tuple[str, str]]) -> int:
        """Batch form of :meth:`add_page` (one actor call per batch); returns pages added."""
        n = 0
        for url, visible in pages:
            self.add_page(url, visible)
            n += 1
        return n

    def flush(self) -> int:
        """Make every page added so far durable; returns the number of pages spilled."""
        self.spill.flush()
        return self.spill.count

    def close(self) -> None:
        self.spill.close()

    def finish(self, id_of: Callable[[str], int | None], num_nodes: int,
               min_df: int | None = None, codes: dict[str, str] | None = None) -> dict:
        """The finishing pass over every agent's spill files of this crawl → ``DIR/summaries/``
        (``min_df``: the archive's default)."""
        from raycrawl.storage import summaries  # (the archive's numba decoder: not for a crawl's processes)

        self.flush()
        paths = summary_spill.spill_paths(self.crawl_dir)
        return summaries.build_archive(
            summary_spill.iter_spill(paths), layout(self.crawl_dir).summaries / summaries.DEFAULT_BASENAME,
            id_of, num_nodes, summaries.DEFAULT_MIN_DF if min_df is None else min_df, codes,
            records_again=lambda: summary_spill.iter_spill(paths))
