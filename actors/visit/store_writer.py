"""The store writer: WARC records and link records of one agent, in one place (a role of its
parsing worker, actors/visit/parsing_worker.py).

The agent hands it finished visits with their link records already built; it writes the exchange
(a response; a revisit only for a byte-identical payload) to the WARC store, puts the record's position in the record,
and appends the batch of link records. Everything is on disk (fsynced: core/durable.py) before
the call returns, so the agent may commit the batch in Redis afterwards.

Without a shared ``OUT`` (``agent_dir``) a disk is not enough: the node may never come back (a spot
VM reclaimed). There the writer works in *pieces*: the WARC and link-record files of at most
``ship_seconds`` of batches, closed and uploaded to the object store together (in the background),
and each batch's answer says which piece holds it and which pieces are in the store. The agent
commits a batch in Redis only once its piece is (actors/visit/batch_commit.py): a page counted as done
is in the store, and a node lost costs at most the pages of its last pieces, which Redis still
holds in flight and which the crawl fetches again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raycrawl.exchange import FetchResult
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import RENDERED_SUBDIR, LinkRecord, LinkRecordWriter
from raycrawl.storage.out_store import Shipper
from raycrawl.storage.warc import Revisit, WarcStore, warc_info

log = logging.getLogger(__name__)



@dataclass(slots=True)
class StoreItem:
    """One exchange for the store writer: its WARC record — a revisit of ``revisit_of`` (URL,
    WARC-Date, payload digest or None: :meth:`WarcStore.write`) when given — and its link record
    (None for robots.txt, which has none)."""

    fr: FetchResult
    revisit_of: Revisit | None = None
    record: LinkRecord | None = None
    rendered: bool = False
    """``fr`` is a page as a browser rendered it (its body the DOM): a WARC resource record
    ``urn:dom:URL``, its record among the rendered ones (actors/visit/stages/render.py)."""
    screenshot: bytes = b""
    """The rendered page's screenshot (PNG), if one was taken."""
    robots: bool = False
    """``fr`` is a request of a robots.txt fetch (``/robots.txt`` or a redirect it followed)."""


@dataclass(frozen=True)
class Stored:
    """Where a batch went: the piece holding it and the last piece wholly in the object store
    (both 0 when the writer does not work in pieces: the batch may be committed at once)."""

    piece: int = 0
    shipped: int = 0

    @property
    def in_store(self) -> bool:
        return self.piece <= self.shipped


class StoreWriter:
    def __init__(self, crawl_dir: str | Path, writer: str = "agent0", max_file_bytes: int = 1 << 30,
                 info: dict[str, str] | None = None, prefix: str = "", out_store: str | None = None,
                 ship_seconds: float = 0.0) -> None:
        """``ship_seconds`` > 0 (with ``out_store``): work in pieces of at most that many seconds
        (module doc)."""
        # A closed file goes to the object store at once, in the background (storage/out_store.py).
        self.shipper = Shipper(out_store, Path(crawl_dir)) if out_store else None
        closed = self.shipper.closed if self.shipper else None
        self.warc = WarcStore(layout(Path(crawl_dir)).warc, f"{prefix}-{writer}" if prefix else writer, max_file_bytes,
                              info=info, on_closed=closed)
        stored = [k.rsplit("/", 1)[-1] for k in self.shipper.store.listing("links/")] if self.shipper else []
        self.links = LinkRecordWriter(crawl_dir, writer, on_closed=closed, elsewhere=stored)
        shown = [k.rsplit("/", 1)[-1] for k in self.shipper.store.listing(f"{RENDERED_SUBDIR}/")] if self.shipper else []
        self.rendered = LinkRecordWriter(crawl_dir, writer, on_closed=closed, elsewhere=shown, subdir=RENDERED_SUBDIR)
        self.ship_seconds = ship_seconds if self.shipper is not None else 0.0
        self.piece = 1  # the piece being written
        self.piece_files: list[Callable[[], None]] = []  # other writers' files of a piece: each completes its own
        self.piece_began: float | None = None  # when its first batch was written (None: empty)

    @classmethod
    def of_agent(cls, crawl_dir: str, writer: str, settings: Settings) -> StoreWriter:
        """The store writer of agent ``writer``, as the crawl's settings ask."""
        return cls(crawl_dir, writer, settings.warc_max_bytes, warc_info(settings, Path(crawl_dir).resolve().name),
                   settings.warc_prefix, settings.out_store, settings.ship_seconds if settings.agent_dir else 0.0)

    def _end_piece(self) -> None:
        """Close the piece's files; they go to the store, the piece counted shipped after them."""
        self.warc.close()
        self.links.close()
        self.rendered.close()
        for complete in self.piece_files:
            complete()
        self.shipper.piece_done(self.piece)
        self.piece += 1
        self.piece_began = None

    def ship(self, timeout: float | None = None) -> Stored:
        """End the piece in progress now and wait (up to ``timeout`` s) until it is in the store: the
        agent has nothing more to write for a while (idle, pausing, stopping)."""
        if not self.ship_seconds:
            return Stored()
        last = self.piece - 1
        if self.piece_began is not None:
            last = self.piece
            self._end_piece()
        return Stored(last, self.shipper.wait_shipped(last, timeout))

    def write_batch(self, items: list[StoreItem]) -> Stored:
        """Store ``items`` (a link record's ``dup_of``/``dup_kind`` mark its response as a
        duplicate). Exchanges without a response (status 0) get no WARC record. Returns where the
        batch went (:class:`Stored`)."""
        if self.ship_seconds:
            now = time.monotonic()
            if self.piece_began is not None and now - self.piece_began >= self.ship_seconds:
                self._end_piece()
            if self.piece_began is None:
                self.piece_began = now
        records, rendered = [], []
        for item in items:
            fr, revisit_of, record = item.fr, item.revisit_of, item.record
            if item.rendered and record is not None:
                record.warc = self.warc.write_rendered(fr.url, fr.body, fr.ended, item.screenshot)
                rendered.append(record)
                continue
            pos = None
            if fr.status > 0:
                dup = (record.dup_of, record.dup_kind) if record is not None and record.dup_of else None
                pos = self.warc.write(fr, revisit_of, None if revisit_of else dup, robots=item.robots)
            if record is not None:
                record.warc = tuple(pos) if pos else None
                records.append(record)
        self.warc.sync()
        self.links.write_batch(records)
        self.rendered.write_batch(rendered)
        if not self.ship_seconds:
            return Stored()
        return Stored(self.piece, self.shipper.shipped)

    def close(self) -> None:
        self.warc.close()
        self.links.close()
        self.rendered.close()
        if self.shipper is not None:
            self.shipper.close()
