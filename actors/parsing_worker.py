"""The parsing worker: one process carrying an agent's parser, store writer and summary writer
(BUbiNG's parsing threads parse a page and hand it to the store themselves).

Each role keeps its own class (actors/parser.py ``BatchParser``, actors/store_writer.py,
actors/summary_writer.py); what they share is the process. A crew used to run each in a Ray actor
of its own: three worker processes of ~1–1.5 s of CPU each to start (on two cores, what set the
time to the first request), a page's visible text sent back to the agent and out again to the
summary writer, and one more call per batch. Here the parser keeps the texts of the batch it
parsed, and the write of that batch spills the summaries of the pages the agent names, from those
texts, in the same call: stored and spilled before the call returns, so the agent commits after.

Calls run one at a time, in the order the agent sends them: the parse of a batch comes before its
write, and the write before the next batch's parse. A worker restarted in between has lost the
texts: the summaries are then made from the bodies the write carries (the same text,
``raycrawl.text.page_text``), so a retried call loses nothing.
"""

from __future__ import annotations

import logging

from raycrawl.actors import named, per_batch
from raycrawl.actors.parser import BatchParser, ParseResult
from raycrawl.actors.store_writer import Stored, StoreWriter
from raycrawl.actors.summary_writer import SummaryWriter
from raycrawl.exchange import FetchResult
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import join_run
from raycrawl.text import page_text

log = logging.getLogger(__name__)


class ParsingWorker:
    """The three roles, and the texts of the last batch parsed."""

    def __init__(self, crawl_dir: str, writer: str, settings: Settings) -> None:
        self.parser = BatchParser(settings.user_agent, settings.focus)
        self.store = StoreWriter.of_agent(crawl_dir, writer, settings)
        self.summaries = None
        if settings.summaries_at_crawl:
            shipper = self.store.shipper
            elsewhere = [k.rsplit("/", 1)[-1] for k in shipper.store.listing("summaries/")] if shipper else []
            self.summaries = SummaryWriter(crawl_dir, writer, on_closed=shipper.closed if shipper else None,
                                           elsewhere=elsewhere)
            if self.store.ship_seconds:  # a piece holds the summaries of its pages too
                self.store.piece_files.append(self.summaries.spill.roll)
        self.texts: dict[str, str] = {}

    def parse_batch(self, batch: list[FetchResult]) -> list[ParseResult]:
        results = self.parser.parse_batch(batch)
        self._keep(results)
        return results

    def parse_and_sketch(self, batch: list[FetchResult], num_perm: int, k: int, seed: int):  # noqa: ANN201
        out = self.parser.parse_and_sketch(batch, num_perm, k, seed)
        self._keep(out[0])
        return out

    def _keep(self, results: list[ParseResult]) -> None:
        if self.summaries is not None:
            self.texts = {r.url: r.text for r in results}

    def write_batch(self, items: list, summarise: list[str] | None = None) -> Stored:
        """Store ``items`` (:meth:`StoreWriter.write_batch`), and spill the summaries of the pages
        ``summarise`` names (URLs of items); both durable on return."""
        stored = self.store.write_batch(items)
        if summarise and self.summaries is not None:
            held, self.texts = self.texts, {}
            if any(url not in held for url in summarise):  # (not parsed, or parsed before a restart)
                fetched = {fr.url: fr for fr, _, _ in items}
                held.update({url: page_text(fetched[url].body, fetched[url].charset)
                             for url in summarise if url not in held})
            texts = [(url, held[url]) for url in summarise]
            self.summaries.add_pages(texts)
            self.summaries.flush()
        return stored

    def ship(self, timeout: float | None = None) -> Stored:
        return self.store.ship(timeout)

    def close(self) -> None:
        self.store.close()
        if self.summaries is not None:
            self.summaries.close()


def actor_class():  # noqa: ANN201 - a Ray actor class, built lazily
    """The Ray actor shell (built lazily so importing this module does not import Ray)."""
    import ray

    # Restarted after a crash, its writers start new files (never after a torn tail) and Ray
    # retries the call; the agent commits only after a write returns, so nothing is lost.
    @ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
    @named
    class ParsingWorkerActor:
        def __init__(self, crawl_dir: str, writer: str, settings: Settings) -> None:
            self.run_lock = join_run(crawl_dir)  # storage/crawl_dir.py, "Workers"
            self.worker = ParsingWorker(crawl_dir, writer, settings)

        @per_batch
        def parse_batch(self, batch: list[FetchResult]) -> list[ParseResult]:
            return self.worker.parse_batch(batch)

        @per_batch
        def parse_and_sketch(self, batch: list[FetchResult], num_perm: int, k: int, seed: int):  # noqa: ANN202
            return self.worker.parse_and_sketch(batch, num_perm, k, seed)

        @per_batch
        def write_batch(self, items: list, summarise: list[str] | None = None) -> Stored:
            return self.worker.write_batch(items, summarise)

        def ship(self, timeout: float | None = None) -> Stored:
            return self.worker.ship(timeout)

        def close(self) -> None:
            self.worker.close()

    return ParsingWorkerActor
