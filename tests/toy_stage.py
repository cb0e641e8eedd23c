"""A crawl-time stage of one's own, as docs/architecture.md shows it: nothing outside this file
names it but the ``stages`` (or ``extra_stages``) setting (tests/test_visit_batch.py)."""

from raycrawl.actors.visit.visit_stage import FetchHooks, PageVisit, VisitStage


class NoPrivate(VisitStage):
    """Never follow a link into a /private/ area, and count the pages that point at one."""

    name = "no-private"

    def observe(self, visit: PageVisit) -> None:
        if visit.parsed is not None and any("/private/" in u for u in visit.parsed.links):
            visit.counters["toy:pages-linking-private"] += 1

    def judge(self, url: str, host: str) -> str | None:
        return "toy-private" if "/private/" in url else None

    @classmethod
    def fetch_hooks(cls, settings, frontier):  # noqa: ANN001, ANN206 - VisitStage's signature
        return FetchHooks(refuse=lambda url, host: "toy-private" if "/private/" in url else None)
