"""Exact duplicates as a stage: the first page with a text digest owns it, for every agent."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from raycrawl.actors.visit.visit_stage import Findings, PageVisit, StageContext, VisitStage, mark_duplicate
from raycrawl.exchange import FetchResult
from raycrawl.storage.warc import Revisit, warc_date

if TYPE_CHECKING:
    from raycrawl.settings import Settings


def exact_duplicates(pages: list[tuple[FetchResult, str]], owners: list[str]
                     ) -> tuple[dict[str, tuple[str, str]], dict[str, Revisit]]:
    """Read the digest table's answers: ``pages`` are (exchange, payload SHA-1) of the pages with
    a text digest, ``owners`` the table's entry for each digest (JSON [first URL, its WARC-Date,
    its payload SHA-1]). Returns ``dup_of`` (URL → (first URL, "exact")) and ``revisit_of`` (URL →
    (first URL, date, payload digest)) — a revisit only for a byte-identical, whole payload."""
    dup_of: dict[str, tuple[str, str]] = {}
    revisit_of: dict[str, Revisit] = {}
    for (fr, payload), owner in zip(pages, owners, strict=True):
        first_url, first_date, *first_payload = json.loads(owner)
        if first_url != fr.url:
            dup_of[fr.url] = (first_url, "exact")
            if first_payload == [payload] and not fr.truncated:
                revisit_of[fr.url] = Revisit(first_url, first_date, payload)
    return dup_of, revisit_of


class ExactDuplicates(VisitStage):
    """Pages with the same text digest (the parser's): the first URL to claim it in the crawl's
    duplicate stores (actors/visit/duplicates.py) owns it, for every agent; every other page with
    that digest is recorded as its duplicate, and its WARC record is a revisit of the owner's
    capture only when its payload is byte-identical and whole (the owner's date and payload SHA-1
    come with the claim)."""

    name = "exact-dup"

    def __init__(self, table) -> None:  # noqa: ANN001 - what claims digests: actors/visit/duplicates.py
        self.table = table
        self.found = Findings()

    @classmethod
    def build(cls, settings: Settings, ctx: StageContext) -> ExactDuplicates | None:
        return None if ctx.duplicates is None else cls(ctx.duplicates)

    def find(self, findings: Findings) -> None:
        self.found = findings
        with_digest = [(findings.fetched[u], findings.parsed[u]) for u in findings.parsed_urls if findings.parsed[u].digest]
        if not with_digest:
            return
        payloads = [(fr, findings.sha1s[fr.url]) for fr, _ in with_digest]
        owners = self.table.claim_digests([(pr.digest, json.dumps([fr.url, warc_date(fr.ended), payload]))
                                           for (fr, pr), (_, payload) in zip(with_digest, payloads, strict=True)])
        dup_of, revisit_of = exact_duplicates(payloads, owners)
        findings.dup_of.update(dup_of)
        findings.revisit_of.update(revisit_of)

    def observe(self, visit: PageVisit) -> None:
        url = visit.fr.url
        dup = self.found.dup_of.get(url)
        if visit.parsed is not None and dup is not None and dup[1] == "exact":
            mark_duplicate(visit, dup[0], "exact", self.found.revisit_of.get(url))


STAGE = ExactDuplicates
