"""Carrying out one batch of finished visits: parse, the stages' findings, decide, store, route, commit.

The order is the crash semantics: a visit is committed in Redis (its in-flight entry dropped, its
counters added, the AOF synced) only after its WARC and link records and its summaries are on
disk (fsynced: core/durable.py) and the links it yields are in the sieves' pending logs (handed
to the OS: a process crash keeps them, a machine crash may not; docs/crawling.md). After a kill -9
the in-flight set therefore holds exactly the visits that may have to be redone. The decision
itself is :func:`actors.visit.visit_batch.decide` (no Ray, no Redis).

Two batches are in hand at once: while the store and summary writers write batch N, the parser
parses batch N+1, and N is committed once its writes returned (:meth:`BatchCommitter.finish`,
called by the next :meth:`~BatchCommitter.process`). The store receives N+1 after N (one caller,
one actor: Ray keeps the order), so the archive is written in batch order, and each commit still
follows its own batch's durable writes. The parser also runs the stages' work on the batch (the
near-duplicate fingerprints, a focused crawl's scores), so the agent's serial cycle keeps only the
lookups (benchmarks/RESULTS.md, issue 16: on
two cores the crawl is bound by CPU either way; with more cores the cycle should matter more, not
measured here).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

from raycrawl import metrics
from raycrawl.actors.cluster.crew import Crew
from raycrawl.actors.frontier.link_router import LinkRouter
from raycrawl.actors.visit.store_writer import Stored, StoreItem
from raycrawl.actors.visit.visit_batch import decide
from raycrawl.actors.visit.visit_stage import Findings, Outcome, Stages
from raycrawl.env import env_seconds
from raycrawl.errors import CrawlStop
from raycrawl.exchange import FetchResult, VisitKind
from raycrawl.sitemaps import is_sitemap
from raycrawl.storage.link_records import LinkRecord
from raycrawl.storage.redis_frontier import RedisFrontier
from raycrawl.storage.warc import sha1_b32

log = logging.getLogger(__name__)

# Seconds a forced ship waits for the object store before the agent stops without it.
SHIP_PATIENCE = env_seconds("RAYCRAWL_STORE_WAIT", 60.0, floor=1.0)


@dataclass
class Held:
    """A stored batch whose piece is not yet in the object store (without a shared OUT): Redis keeps
    its URLs in flight until it is committed."""

    piece: int
    keys: list[str]
    counters: Counter[str]
    latencies: list[float]
    since: float  # time.monotonic() when held


@dataclass
class Written:
    """A batch whose records are being written: commit it once ``refs`` return."""

    refs: list
    keys: list[str]
    counters: Counter[str]
    follow: list[str]
    levels: list[int]
    latencies: list[float]
    delivered: bool


@dataclass
class Deferred:
    """A stored batch whose links could not reach a dead agent's sieve: sent again after the
    membership change, then committed."""

    batch: Written
    piece: int  # the piece holding its records (0: no pieces)


class BatchCommitter:
    def __init__(self, frontier: RedisFrontier, crew: Crew, router: LinkRouter, stages: Stages) -> None:
        """``stages``: the crawl-time stages in the chain's order (actors/visit/chain.py), duplicates included."""
        self.f, self.crew, self.router, self.stages = frontier, crew, router, stages
        self.epoch = frontier.epoch()  # the pass of a periodic crawl (actors/cluster/periodic.py)
        self.pages = 0  # committed by this agent in this run
        self.deferred: list[Deferred] = []
        self.written: Written | None = None  # the previous batch, until finish()
        # Without a shared OUT, oldest first (actors/visit/store_writer.py: pieces).
        self.held: list[Held] = []
        self.shipped = 0  # the last piece known to be in the store
        self.stalled = False  # a forced ship found the store not answering

    def process(self, outcomes: list[Outcome]) -> None:
        """Parse, decide and start writing ``outcomes``; commit the previous batch meanwhile. The
        caller calls :meth:`finish` when no batch follows."""
        import ray

        crew, stages = self.crew, self.stages
        pages = [o for o in outcomes if o.kind == VisitKind.PAGE]
        to_parse = [o.fr for o in pages if o.fr.error is None and 200 <= o.fr.status < 300
                    and (stages.parses(o.fr) or is_sitemap(o.fr.ctype, o.fr.body))]
        parsing = crew.worker.parse.remote(to_parse, stages.parser_works()) if to_parse else None
        # Rendered DOMs: parsed for their links and text, apart (no stage's parser work: they are
        # not fetches, and no duplicate of anything).
        doms = [o.fr for o in outcomes if o.kind == VisitKind.RENDER and o.render.final]
        rendering = crew.worker.parse.remote(doms, {}) if doms else None
        self.finish()
        found = Findings(parsed_urls=[fr.url for fr in to_parse], fetched={fr.url: fr for fr in to_parse})
        results = []
        if parsing is not None:
            results, found.extras = ray.get(parsing)
        found.parsed = dict(zip(found.parsed_urls, results, strict=True))
        if rendering is not None:
            found.rendered = dict(zip([fr.url for fr in doms], ray.get(rendering)[0], strict=True))
        # Each payload's SHA-1 once: the duplicates, the link records and the revisit decision read it.
        found.sha1s = {o.fr.url: sha1_b32(o.fr.body) for o in pages if o.fr.status > 0 and o.fr.status != 304}
        stages.find(found)
        decision = decide(outcomes, found, stages)
        stages.settle()
        refs = [crew.worker.write_batch.remote(decision.items, decision.summarise)]
        latencies = [o.fr.ended - o.fr.started for o in pages if o.fr.status]
        delivered = self.router.deliver(crew.sieve, decision.follow, decision.levels)
        self.written = Written(refs, [o.key for o in outcomes if o.key], decision.counters, decision.follow, decision.levels,
                               latencies, delivered)

    def finish(self) -> None:
        """Wait for the batch being written to be durable, then commit it (or hold it: its links
        could not reach a dead agent's sieve, see :meth:`LinkRouter.deliver`)."""
        w, self.written = self.written, None
        if w is None:
            return
        stored = get_all(w.refs)[0]
        if w.delivered:
            self.commit_stored(stored, w.keys, w.counters, w.latencies)
        else:
            self.deferred.append(Deferred(w, stored.piece))

    def retry_deferred(self) -> None:
        """Send deferred batches' links to the shards' new owners and commit them."""
        deferred, self.deferred = self.deferred, []
        for d in deferred:
            b = d.batch
            if self.router.deliver(self.crew.sieve, b.follow, b.levels, cache=False):
                self.commit_stored(Stored(d.piece, self.shipped), b.keys, b.counters, b.latencies)
            else:
                self.deferred.append(d)

    def commit_stored(self, stored: Stored, keys: list[str], counters: Counter[str], latencies: list[float]) -> None:
        """Commit a stored batch now, or once the piece holding it is in the
        object store; and every held batch whose piece is there by now. Commits keep the order of
        the batches."""
        if stored.piece and (self.held or stored.piece > max(self.shipped, stored.shipped)):
            self.held.append(Held(stored.piece, keys, counters, latencies, time.monotonic()))
        else:
            self.commit(keys, counters, latencies)
        self._commit_shipped(stored.shipped)

    def _commit_shipped(self, shipped: int) -> None:
        self.shipped = max(self.shipped, shipped)
        while self.held and self.held[0].piece <= self.shipped:
            h = self.held.pop(0)
            self.commit(h.keys, h.counters, h.latencies)

    def ship(self, force: bool, timeout: float = SHIP_PATIENCE) -> None:
        """Have the store writer close and upload its piece now, then commit what it held: when
        ``force`` (the agent stops, pauses, or has nothing left to fetch) or once the oldest held
        batch has waited a piece's time (no later batch closed its piece)."""
        import ray

        if not self.held:
            return
        if not force and time.monotonic() - self.held[0].since < self.crew.ship_seconds:
            return
        if self.stalled:  # (it did not answer before: a last short try)
            timeout = 5.0
        stored = ray.get(self.crew.worker.ship.remote(timeout))
        self._commit_shipped(stored.shipped)
        if self.held and force:
            # Nothing else to do but wait for a store that does not answer: stop, with the held
            # pages in flight (fetched again on --resume; their pieces uploaded then, duplicates).
            self.stalled = True
            raise CrawlStop(f"the object store took no piece of agent {self.router.name}'s WARC records for "
                            f"{timeout:.0f} s ({len(self.held)} batches wait, their pages not counted); stopped "
                            "with everything committed before: once the object store answers, --resume continues")

    def commit(self, keys: list[str], counters: Counter[str], latencies: list[float]) -> None:
        self.f.commit(keys, counters)
        self.pages += counters["pages"]
        metrics.record_batch(self.router.name, counters, latencies)

    def record_failures(self, failed: list[tuple[str, str]], budgeted: bool = True) -> None:
        """URLs the distributor could not schedule (DNS failure, forbidden network), or orphans
        claimed from a dead agent (``budgeted`` False: its budget counted them): an error link
        record each, committed like visits. Each is in ``P failing`` (the distributor's step put
        it there) until that commit, so a death before it leaves it for another agent to record."""
        import ray

        if budgeted and self.crew.budgeted:  # failures count against the page budget like fetched pages
            ray.get(self.crew.fetchers[0].consume_budget.remote(len(failed)))
        now = time.time()
        records = [LinkRecord(url, time=now, error=kind, epoch=self.epoch) for url, kind in failed]
        stored = ray.get(self.crew.worker.write_batch.remote([StoreItem(FetchResult(url=r.url, ip=""), None, r)
                                                              for r in records]))
        counters = Counter({"pages": len(records), "status:0": len(records)})
        counters.update(f"error:{kind}" for _, kind in failed)
        self.commit_stored(stored, [url for url, _ in failed], counters, [])


def get_all(refs: list) -> list:
    """ray.get of every ref, even after one failed (so Ray reports none as unhandled); then raise
    the first failure."""
    import ray

    results, first = [], None
    for ref in refs:
        try:
            results.append(ray.get(ref))
        except Exception as exc:  # noqa: BLE001 - re-raised below, once all are read
            first = first or exc
    if first is not None:
        raise first
    return results
