"""The epochs of a periodic crawl: one crawl directory visited pass after pass.

``raycrawl crawl --revisit`` runs a pass over an existing crawl directory; its link records carry
the pass number as ``epoch`` (the first crawl is epoch 0). A visit of a page seen before is one of:

* a full response (the page's bytes changed, or were never stored under this URL);
* a ``304 Not Modified`` to the conditional GET (record ``status`` 304, ``revisit_of`` naming
  the capture the server said was still current; WARC ``revisit``, profile server-not-modified);
* a 200 whose payload is byte-identical to the page's last capture (``revisit_of`` set; WARC
  ``revisit``, profile identical-payload-digest, written only after the SHA-1 comparison).

From the records this module derives what the rest of the pipeline reads:

* :func:`histories`: per URL, its visits as :class:`policies.revisit.Visit` (changed or not) and
  its last capture (:class:`Capture`: what a conditional GET sends, what a revisit refers to);
* :func:`snapshots`: the picture of the web as of each pass — per URL its latest answered visit
  in a pass ≤ K, a 304 or identical revisit standing for the capture it refers to (its links,
  digest and WARC position) — which the index (``raycrawl index build``) and the temporal spam
  features (``raycrawl spam temporal``) read as versions, one per epoch.

A crawl directory without revisit passes has the single epoch 0 and is read as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from raycrawl.policies.revisit import Visit
from raycrawl.storage.capture import Capture
from raycrawl.storage.link_records import LinkRecord, iter_link_records
from raycrawl.storage.warc import warc_date

Record = LinkRecord


def _ordered(records: Iterable[Record]) -> dict[str, list[Record]]:
    by_url: dict[str, list[Record]] = {}
    for rec in records:
        if rec.url:
            by_url.setdefault(rec.url, []).append(rec)
    for recs in by_url.values():
        recs.sort(key=lambda r: (r.epoch, r.time))
    return by_url


def answered(rec: Record) -> bool:
    """A visit that got an HTTP answer (not a DNS/connect error, not skipped by robots)."""
    return (rec.status) > 0


def is_revisit(rec: Record) -> bool:
    """Its WARC record is a revisit (a 304, or a byte-identical payload): it stands for an earlier capture."""
    return bool(rec.revisit_of)


def _capture(rec: Record) -> Capture | None:
    """The capture a 200 record stores or refers to (None: not a whole 200 response with a digest)."""
    if rec.status != 200 or not rec.sha1 or rec.error or not rec.warc:
        return None
    ref = rec.revisit_of
    url, date = (ref[0], ref[1]) if ref else (rec.url, warc_date(rec.time))
    return Capture(url, date, rec.sha1, rec.etag, rec.modified)


@dataclass
class History:
    visits: list[Visit]
    capture: Capture | None  # the last stored content (None: nothing a revisit could refer to)
    level: int               # the priority level it was last fetched from


def history(recs: list[Record]) -> History:
    """One URL's records (in pass order) as visits and its last capture."""
    visits: list[Visit] = []
    capture: Capture | None = None
    state: tuple | None = None  # (status, content digest) after the last answered visit
    level = 0
    for rec in recs:
        if not answered(rec):
            continue
        level = rec.level
        if rec.status == 304 and rec.revisit_of:
            now = state  # the server says: unchanged
        else:
            now = (rec.status, rec.sha1)
            if rec.status == 200 and not rec.sha1:
                now = None  # a record without a payload digest (older crawls): no comparison
        changed = None if state is None or now is None else now != state
        visits.append(Visit(rec.epoch, changed))
        state = now
        capture = _capture(rec) or (capture if rec.status == 304 else None)
    return History(visits, capture, level)


def histories(crawl_dir: str | Path) -> dict[str, History]:
    """Every fetched URL's :class:`History`, from the link records."""
    return {url: history(recs) for url, recs in _ordered(iter_link_records(crawl_dir)).items()}


def epochs(crawl_dir: str | Path) -> list[int]:
    """The passes the crawl's link records hold (``[0]`` for a crawl never revisited)."""
    return sorted({rec.epoch for rec in iter_link_records(crawl_dir)}) or [0]


def snapshots(crawl_dir: str | Path) -> dict[int, dict[str, Record]]:
    """Epoch K → {URL: the record standing for the page as of pass K} (module doc). A revisit
    stands for the last full record before it; a page whose last visit found it gone (404…) is
    its 404 record."""
    by_url = _ordered(iter_link_records(crawl_dir))
    all_epochs = sorted({rec.epoch for recs in by_url.values() for rec in recs}) or [0]
    out: dict[int, dict[str, Record]] = {k: {} for k in all_epochs}
    for url, recs in by_url.items():
        current: Record | None = None
        full: Record | None = None
        i = 0
        for k in all_epochs:
            while i < len(recs) and recs[i].epoch <= k:
                rec = recs[i]
                i += 1
                if not answered(rec) and current is not None:
                    continue  # an error does not erase what the page was
                if is_revisit(rec) and full is not None:
                    current = full
                    continue
                current = rec
                if rec.warc and not is_revisit(rec):
                    full = rec
            if current is not None:
                out[k][url] = current
    return out


class View(NamedTuple):
    """One version of the web a list of crawl directories holds."""

    dir: Path
    epoch: int | None  # a pass of a periodic crawl; None: a directory read whole, as before
    snapshot: dict[str, Record] | None  # that pass's snapshot (None with epoch None)

    @property
    def name(self) -> str:
        return view_name(self.dir, self.epoch)

    def records(self) -> Iterable[Record]:
        return iter_link_records(self.dir) if self.snapshot is None else self.snapshot.values()


def views(crawl_dirs: Iterable[str | Path]) -> list[View]:
    """The versions a list of crawl directories (oldest first) holds: a directory revisited by
    ``--revisit`` passes (records of several epochs) gives one view per pass, with its snapshot;
    any other gives one view of the whole directory."""
    out: list[View] = []
    for d in map(Path, crawl_dirs):
        if len(epochs(d)) > 1:
            out += [View(d, k, snap) for k, snap in snapshots(d).items()]
        else:
            out.append(View(d, None, None))
    return out


def view_records(crawl_dir: str | Path, epoch: int | None) -> Iterable[Record]:
    """The link records of one view: every record (epoch None), or the snapshot of pass ``epoch``."""
    if epoch is None:
        return iter_link_records(crawl_dir)
    return snapshots(crawl_dir)[epoch].values()


def view_name(crawl_dir: Path, epoch: int | None) -> str:
    """How an index's ``stats.json`` names a view: the directory, or ``DIR@K`` for pass K."""
    return str(crawl_dir) if epoch is None else f"{crawl_dir}@{epoch}"


def parse_view(name: str | Path) -> tuple[Path, int | None]:
    """The inverse of :func:`view_name`."""
    text = str(name)
    head, at, k = text.rpartition("@")
    if at and k.isdigit() and not Path(text).exists():
        return Path(head), int(k)
    return Path(text), None
