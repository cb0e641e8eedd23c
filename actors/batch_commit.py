"""Carrying out one batch of finished visits: parse, find duplicates, decide, store, route, commit.

The order is the crash semantics: a visit is committed in Redis (its in-flight entry dropped, its
counters added, the AOF synced) only after its WARC and link records, its summaries and the links
it yields are durable. After a kill -9 the in-flight set therefore holds exactly the visits that
may have to be redone. The decision itself is :func:`actors.visit_batch.decide` (no Ray, no Redis).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any

from raycrawl import metrics
from raycrawl.actors.crew import Crew
from raycrawl.actors.fetch_loop import Outcome
from raycrawl.actors.link_router import LinkRouter
from raycrawl.actors.parser import decode_body
from raycrawl.actors.visit_batch import decide, exact_duplicates, link_record
from raycrawl.exchange import FetchResult
from raycrawl.storage.crawl_pages import is_page
from raycrawl.storage.redis_frontier import RedisFrontier
from raycrawl.storage.warc import sha1_b32, warc_date

log = logging.getLogger(__name__)


class BatchCommitter:
    def __init__(self, frontier: RedisFrontier, crew: Crew, router: LinkRouter, filters: tuple[Any, Any],
                 near: Any = None, spam_gate: Any = None, budgeted: bool = False) -> None:
        """``filters``: (prefetch, postfetch) of policies/filters.py; ``near``: the near-duplicate
        index (actors/shingler.py) or None; ``budgeted``: failures count against a page budget."""
        self.f, self.crew, self.router = frontier, crew, router
        self.prefetch, self.postfetch = filters
        self.near, self.spam_gate, self.budgeted = near, spam_gate, budgeted
        self.pages = 0  # committed by this agent in this run
        # Batches whose links could not reach a dead agent's sieve: (in-flight keys, counters, links, latencies).
        self.deferred: list[tuple[list[str], Counter[str], list[str], list[float]]] = []

    def process(self, outcomes: list[Outcome]) -> None:
        import ray

        crew = self.crew
        pages = [o for o in outcomes if o.kind == "page"]
        to_parse = [o.fr for o in pages if o.fr.error is None and 200 <= o.fr.status < 300 and self.postfetch(o.fr)]
        parsed = dict(zip([fr.url for fr in to_parse],
                          ray.get(crew.parser.parse_batch.remote(to_parse)) if to_parse else [], strict=True))
        # Exact duplicates: the first URL with a text digest owns it, for every agent; the owner's
        # date and payload SHA-1 come along, so that a duplicate whose bytes are the owner's can be a
        # WARC revisit (and only then).
        with_digest = [(fr, parsed[fr.url]) for fr in to_parse if parsed[fr.url].digest]
        payloads = [(fr, sha1_b32(fr.body)) for fr, _ in with_digest]
        owners = self.f.claim_digests([(pr.digest.hex(), json.dumps([fr.url, warc_date(fr.ended), payload]))
                                       for (fr, pr), (_, payload) in zip(with_digest, payloads, strict=True)])
        dup_of, revisit_of = exact_duplicates(payloads, owners)
        if self.near is not None:
            docs = [(fr.url, pr.text) for fr, pr in with_digest if fr.url not in dup_of and pr.text]
            for (url, _), rep in zip(docs, self.near.check_and_add(docs), strict=True):
                if rep is not None and rep != url:
                    dup_of[url] = (rep, "near")
        decision = decide(outcomes, parsed, dup_of, revisit_of, self.prefetch.explain, self.spam_gate)
        refs = [crew.store.write_batch.remote(decision.items)]
        if crew.summary_writer is not None:
            # The pages a post-crawl build reads from the WARC (storage/crawl_pages.py; same
            # decoding), spilled before the commit.
            html = [(o.fr.url, decode_body(o.fr.body, o.fr.charset)[0]) for o in pages
                    if is_page(o.fr.url, o.fr.status, o.fr.ctype, o.fr.truncated, o.fr.url in dup_of)]
            if html:
                refs.append(crew.summary_writer.spill.remote(html))
        latencies = [o.fr.ended - o.fr.started for o in pages if o.fr.status]
        delivered = self.router.deliver(crew.sieve, decision.follow)
        get_all(refs)
        keys = [o.key for o in outcomes]
        if delivered:
            self.commit(keys, decision.counters, latencies)
        else:
            self.deferred.append((keys, decision.counters, decision.follow, latencies))

    def retry_deferred(self) -> None:
        """Send held batches' links to the shards' new owners and commit them."""
        deferred, self.deferred = self.deferred, []
        for keys, counters, follow, latencies in deferred:
            if self.router.deliver(self.crew.sieve, follow, cache=False):
                self.commit(keys, counters, latencies)
            else:
                self.deferred.append((keys, counters, follow, latencies))

    def commit(self, keys: list[str], counters: Counter[str], latencies: list[float]) -> None:
        self.f.commit(keys, counters)
        self.pages += counters["pages"]
        metrics.record_batch(self.router.name, counters, latencies)

    def record_failures(self, failed: list[tuple[str, str]]) -> None:
        """URLs the distributor could not schedule (DNS failure, forbidden network): an error link
        record each, committed like visits."""
        import ray

        if self.budgeted:  # failures count against the page budget like fetched pages
            ray.get(self.crew.fetchers[0].consume_budget.remote(len(failed)))
        now = time.time()
        records = [link_record(url, 0, "", now, "", 0, error=kind) for url, kind in failed]
        # Noted first, so that a crash between the records and their commit is seen as in flight
        # by the resume's consistency check (storage/crawl_check.py), not as a Redis that lost writes.
        self.f.note_failing(dict(failed))
        ray.get(self.crew.store.write_batch.remote([(FetchResult(url=r["url"], ip=""), None, r) for r in records]))
        counters = Counter({"pages": len(records), "status:0": len(records)})
        counters.update(f"error:{kind}" for _, kind in failed)
        self.pages += len(records)
        self.f.commit([], counters)
        self.f.forget_failing([url for url, _ in failed])


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
