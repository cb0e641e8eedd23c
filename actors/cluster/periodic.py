"""A pass of a periodic crawl (``raycrawl crawl --revisit --out DIR``): seed 001's periodic crawler,
through the same frontier as the first crawl.

The driver begins the pass before any agent starts (:func:`begin_pass`): every page fetched so far
gets its next-visit pass from its history (:mod:`policies.revisit`, Cho & Garcia-Molina's change
rate estimators over storage/crawl_epochs.py's histories); those due now are written to
``DIR/revisit/pass-K.tsv`` (URL, priority level), and Redis gets the new pass number and the last
capture of each (``P prior``: the validators of the conditional GET and what an unchanged answer's
WARC revisit refers to). Each agent then puts the due URLs of its shards back in its sieve's
queues (:func:`queue_revisits`) — once per pass, whatever crashes — from where the distributor,
the workbench and every politeness rule treat them as any other URL. Links found in the pass go
through the sieve as ever: new pages are crawled, pages seen before are not (unless due).

The order makes a pass crash-safe: the due file is written before the pass number is, so a pass
that never began is planned again; a pass that began is continued by ``--resume`` (the sieve's
tag stops a second queueing) or left by the next ``--revisit``, whose plan counts what it fetched.
"""

from __future__ import annotations

import logging
from pathlib import Path

from raycrawl.atomic import replace_bytes
from raycrawl.policies.revisit import due
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import PARTS, layout
from raycrawl.storage.crawl_epochs import histories
from raycrawl.storage.link_records import LINKS_SUBDIR
from raycrawl.storage.out_store import OutStore
from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)


def due_path(out: Path, epoch: int) -> Path:
    return layout(out).revisit / f"pass-{epoch}.tsv"


def due_key(epoch: int) -> str:
    """The due file's key in the object store (agents without a shared out take it from there)."""
    return f"{PARTS['revisit']}/pass-{epoch}.tsv"


def begin_pass(out: Path, f: RedisFrontier, settings: Settings, store: OutStore | None = None) -> dict[str, int]:
    """Plan and begin the next pass over the crawl in ``out``; returns (and logs) what it planned.
    With ``store`` (agents without a shared out, ``--agent-dir``) the histories come from the link
    records in the store, and the due file goes there before the pass number reaches Redis."""
    epoch = f.epoch() + 1
    rows, priors, known = [], {}, 0
    links = _links_from(store, out) if store is not None else out
    seen = histories(links)
    if store is not None:
        import shutil

        shutil.rmtree(links, ignore_errors=True)
    for url, h in seen.items():
        if not h.visits:
            continue  # never answered (DNS, connection, robots): nothing to revisit
        known += 1
        if due(h.visits, epoch, max_interval=settings.revisit_max_interval):
            rows.append(f"{url}\t{h.level}\n")
            if h.capture is not None:
                priors[url] = h.capture
    path = due_path(out, epoch)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_bytes(path, "".join(rows).encode())
    if store is not None:
        store.put(path, due_key(epoch))
    f.begin_pass(epoch, priors)
    plan = {"pass": epoch, "due": len(rows), "conditional": len(priors), "known": known}
    log.warning("pass %d: %d of %d pages due (%d with validators for a conditional GET)",
                epoch, len(rows), known, len(priors))
    return plan


def _links_from(store: OutStore, out: Path) -> Path:
    """A directory holding a copy of every link record file in the store (the agents' pieces)."""
    import shutil

    copy = out / ".pass-links"
    shutil.rmtree(copy, ignore_errors=True)
    store.sync_down(copy, under=LINKS_SUBDIR + "/")
    return copy


def fetch_due(store: OutStore, out: Path, epoch: int) -> None:
    """An agent without a shared out: the pass's due file from the store into its directory."""
    store.get(due_key(epoch), due_path(out, epoch))


def read_due(out: Path, epoch: int) -> tuple[list[str], list[int]]:
    """The URLs pass ``epoch`` revisits and their priority levels."""
    path = due_path(out, epoch)
    urls, levels = [], []
    for line in path.read_text().splitlines() if path.exists() else ():
        url, _, level = line.partition("\t")
        urls.append(url)
        levels.append(int(level or 0))
    return urls, levels


def queue_revisits(out: Path, epoch: int, sieve, owns) -> int:
    """Put the due URLs of this agent's shards (``owns(url)``) in its sieve's queues, once per pass
    (``sieve``: the agent's sieve actor). Returns how many were queued by this call."""
    import ray

    urls, levels = read_due(out, epoch)
    keep = [i for i, u in enumerate(urls) if owns(u)]
    queued = ray.get(sieve.requeue.remote([urls[i] for i in keep], [levels[i] for i in keep], epoch))
    if queued:
        log.info("pass %d: %d URLs to revisit queued", epoch, queued)
    return queued
