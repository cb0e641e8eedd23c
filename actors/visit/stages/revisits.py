"""A periodic crawl's pass as a stage: an unchanged revisited page is a WARC revisit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import PageVisit, StageContext, VisitStage
from raycrawl.exchange import FetchResult
from raycrawl.storage.warc import Revisit

if TYPE_CHECKING:
    from raycrawl.settings import Settings
    from raycrawl.storage.capture import Capture


def unchanged(fr: FetchResult, prior: Capture | None, sha1: str | None) -> Revisit | None:
    """The WARC revisit a revisited page's answer is (storage/crawl_epochs.py), or None: a 304 to
    our conditional GET → (captured URL, its date, None: profile server-not-modified); a whole 200
    whose payload SHA-1 is the last capture's → (URL, date, digest: identical-payload-digest).
    ``prior``: the page's last capture when the fetch was a revisit; ``sha1``: the payload digest
    of ``fr.body``."""
    if prior is None:
        return None
    if fr.status == 304:
        return Revisit(prior.url, prior.date, None)
    if fr.status == 200 and not fr.truncated and not fr.error and sha1 == prior.sha1:
        return Revisit(prior.url, prior.date, prior.sha1)
    return None


class Revisits(VisitStage):
    """A periodic crawl's pass (actors/cluster/periodic.py): records are tagged with it, and a revisited
    page that did not change is a WARC revisit of its last capture."""

    name = "revisits"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> Revisits:
        return cls(ctx.epoch)

    def observe(self, visit: PageVisit) -> None:
        visit.record.epoch = self.epoch
        prior = visit.outcome.prior
        if prior is None:
            return
        visit.revisit = unchanged(visit.fr, prior, visit.record.sha1)
        if visit.revisit is None:
            visit.counters["revisit:changed"] += 1
        else:
            visit.counters["revisit:not-modified" if visit.revisit[2] is None else "revisit:identical"] += 1


STAGE = Revisits
