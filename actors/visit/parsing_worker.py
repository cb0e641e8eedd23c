"""The parsing worker: an agent's parser, store writer and summary writer, together (BUbiNG's
parsing threads parse a page and hand it to the store themselves), in the process that carries the
agent's sieve too (actors/cluster/crew_worker.py).

Each role keeps its own class (actors/visit/parser.py ``BatchParser``, actors/visit/store_writer.py,
actors/visit/summary_writer.py); what they share is the process. A crew used to run each in a Ray actor
of its own: three worker processes of ~1–1.5 s of CPU each to start (on two cores, what set the
time to the first request), a page's visible text sent back to the agent and out again to the
summary writer, and one more call per batch. Here a page's text is tokenised once, by the parser:
its content digest, its near-duplicate sketch and (kept here, not sent to the agent) its summary
come from those tokens, and the write of a batch spills the summaries of the pages the agent
names in the same call: stored and spilled before the call returns, so the agent commits after.
Without a shared OUT the spill files go in the store writer's pieces (actors/visit/store_writer.py): a
page counted as done has its summary in the object store with its WARC record, and a lost node
takes none with it.

Parses run in the order the agent sends them, and writes in theirs; the agent sends a batch's
write once it has the batch's parse. A worker restarted in between has lost the tokens: the
summaries are then made from the bodies the write carries (the same text,
``raycrawl.text.page_text``), so a retried call loses nothing.
"""

from __future__ import annotations

import logging

from raycrawl.actors.visit.parser import BatchParser, ParseResult, words_of
from raycrawl.actors.visit.store_writer import Stored, StoreItem, StoreWriter
from raycrawl.actors.visit.summary_writer import SummaryWriter, counts_of_tokens
from raycrawl.exchange import FetchResult
from raycrawl.settings import Settings
from raycrawl.text import page_text, tokens

log = logging.getLogger(__name__)


class ParsingWorker:
    """The three roles, and the tokens of the pages parsed and not yet written."""

    def __init__(self, crawl_dir: str, writer: str, settings: Settings) -> None:
        self.parser = BatchParser(settings.user_agent)
        self.store = StoreWriter.of_agent(crawl_dir, writer, settings)
        self.summaries = None
        if settings.summaries_at_crawl:
            shipper = self.store.shipper
            elsewhere = [k.rsplit("/", 1)[-1] for k in shipper.store.listing("summaries/")] if shipper else []
            self.summaries = SummaryWriter(crawl_dir, writer, on_closed=shipper.closed if shipper else None,
                                           elsewhere=elsewhere)
            if self.store.ship_seconds:  # a piece holds the summaries of its pages too
                self.store.piece_files.append(self.summaries.spill.roll)
        # The tokens of the texts parsed and not yet written, by fetch ((URL, its end): a URL
        # fetched again in the next batch is another page).
        self.words: dict[tuple[str, float], list[str]] = {}

    def parse(self, batch: list[FetchResult], works: dict | None = None) -> tuple[list[ParseResult], dict]:
        """:meth:`BatchParser.parse`; the tokens are kept for the summaries."""
        results, extras = self.parser.parse(batch, works)
        self._keep(batch, results)
        return results, extras

    def _keep(self, batch: list[FetchResult], results: list[ParseResult]) -> None:
        """Keep the tokens for the summaries; they do not travel to the agent."""
        for fr, r in zip(batch, results, strict=True):
            if self.summaries is not None:
                self.words[(fr.url, fr.ended)] = words_of(r)
            r.words = None

    def write_batch(self, items: list[StoreItem], summarise: list[str] | None = None) -> Stored:
        """Store ``items`` (:meth:`StoreWriter.write_batch`), and spill the summaries of the pages
        ``summarise`` names (URLs of items); both durable on return."""
        stored = self.store.write_batch(items)
        if self.summaries is not None:
            fetched = {it.fr.url: (it.fr, self.words.pop((it.fr.url, it.fr.ended), None), it.rendered) for it in items}
            for url in summarise or ():
                fr, words, rendered = fetched[url]
                if words is None:  # (a page not parsed, or parsed before a restart of this worker)
                    words = tokens(page_text(fr.body, fr.charset))
                self.summaries.add_counts(url, *counts_of_tokens(words), rendered=rendered)
            if summarise:
                self.summaries.flush()
        return stored

    def ship(self, timeout: float | None = None) -> Stored:
        return self.store.ship(timeout)

    def close(self) -> None:
        if self.summaries is not None:  # (first: its last file goes to the store writer's shipper)
            self.summaries.close()
        self.store.close()
