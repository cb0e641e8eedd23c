"""The batch decision (actors/visit/visit_batch.py): link records, revisits, links to follow and counters
of one batch of finished visits, decided with no Ray and no Redis."""

from __future__ import annotations

import json

import pytest

from raycrawl.actors.visit.parser import ParseResult
from raycrawl.actors.visit.stages.spam_gate import SpamGateStage
from raycrawl.actors.visit.visit_batch import decide, error_kind
from raycrawl.actors.visit.visit_stage import Findings, Outcome, Stages, VisitStage
from raycrawl.exchange import FetchResult
from raycrawl.storage.warc import sha1_b32

A, B, C = "http://a.test/", "http://a.test/copy", "http://b.test/x"


def page(url: str, status: int = 200, body: bytes = b"<p>hi</p>", **kw) -> FetchResult:
    return FetchResult(url=url, ip="127.0.0.2", status=status, body=body, ctype="text/html", started=1.0,
                       ended=2.0, **kw)


class Refuse(VisitStage):
    """Drops the links that contain ``part``."""

    def __init__(self, part: str) -> None:
        self.part = part

    def judge(self, url: str, host: str) -> str | None:
        return "host-filter" if self.part in url else None


NONE = Stages([])


def test_pages_links_and_counters() -> None:
    outcomes = [Outcome(A, "page", page(A), attempts=3), Outcome("http://a.test!robots", "robots", page(A + "robots.txt")),
                Outcome(C, "page", page(C, status=404))]
    parsed = {A: ParseResult(A, links=[C, "http://c.test/"], digest=b"d" * 16, title="T")}
    d = decide(outcomes, Findings(parsed), Stages([Refuse("c.test")]))
    records = [it.record for it in d.items if it.record is not None]
    assert [r.url for r in records] == [A, C] and len(d.items) == 3  # robots.txt: stored, no record
    assert records[0].links == [C, "http://c.test/"] and records[0].title == "T"
    assert records[1].error == "http-4xx" and records[1].links == []
    assert d.follow == [C]
    c = d.counters
    assert c["pages"] == 2 and c["robots"] == 1 and c["retries"] == 2 and c["links"] == 1
    assert c["filtered:host-filter"] == 1 and c["status:200"] == 1 and c["status:404"] == 1 and c["error:http-4xx"] == 1


class FirstClaim:
    """The digest table's rule (actors/visit/duplicates.py), in a dict: the first claim of a
    digest stays, every claim answers the entry that stays."""

    def __init__(self) -> None:
        self.table: dict[bytes, str] = {}

    def claim_digests(self, claims: list[tuple[bytes, str]]) -> list[str]:
        return [self.table.setdefault(digest, entry) for digest, entry in claims]


def test_duplicates_are_revisits_only_when_byte_identical() -> None:
    from raycrawl.actors.visit.stages.exact_duplicates import ExactDuplicates, exact_duplicates

    body = b"<p>same</p>"
    first = json.dumps([A, "2026-01-01T00:00:00Z", sha1_b32(body)])
    copy, other, cut = page(B, body=body), page(C, body=b"<p>same</p> "), page(B + "2", body=body, truncated="length")
    dup_of, revisit_of = exact_duplicates([(copy, sha1_b32(body)), (other, sha1_b32(other.body)),
                                           (cut, sha1_b32(body)), (page(A, body=body), sha1_b32(body))],
                                          [first, first, first, first])
    assert dup_of == {B: (A, "exact"), C: (A, "exact"), B + "2": (A, "exact")}  # A owns the digest
    assert revisit_of == {B: (A, "2026-01-01T00:00:00Z", sha1_b32(body))}  # not the other bytes, not a cut body
    # The same through the stage: A claimed the digest in an earlier batch.
    claims = FirstClaim()
    claims.table[b"d" * 16] = first
    stage = ExactDuplicates(claims)
    parsed = {u: ParseResult(u, links=["http://d.test/"], digest=b"d" * 16) for u in (B, C)}
    found = Findings(parsed, parsed_urls=[B, C], fetched={B: copy, C: other},
                     sha1s={B: sha1_b32(copy.body), C: sha1_b32(other.body)})
    stage.find(found)
    d = decide([Outcome(B, "page", copy), Outcome(C, "page", other)], found, Stages([stage]))
    (rev_b, rec_b), (rev_c, rec_c) = ((it.revisit_of, it.record) for it in d.items)
    assert rev_b == revisit_of[B] and rev_c is None
    assert rec_b.dup_of == rec_c.dup_of == A and rec_b.links == rec_c.links == []
    assert rec_b.revisit_of == (A, "2026-01-01T00:00:00Z") and rec_c.revisit_of is None
    assert d.follow == [] and d.counters["dup:exact"] == 2 and d.counters["dup:revisit-records"] == 1


def test_redirects_are_followed_and_errors_classified() -> None:
    moved = page(A, status=301, redirect=C)
    d = decide([Outcome(A, "page", moved), Outcome(B, "page", FetchResult(url=B, ip="", error="dns"))], Findings(),
               NONE)
    assert d.follow == [C] and d.counters["redirects"] == 1
    assert [it.record.error for it in d.items] == [None, "dns"]
    assert error_kind(page(A, status=503)) == "http-5xx" and error_kind(page(A)) is None


class Gate:
    """A spam gate that blocks b.test once it saw one of its pages."""

    def __init__(self) -> None:
        self.blocked: dict[str, float] = {}

    def page_features(self, body: bytes, host: str) -> str:
        return host

    def observe(self, host: str, features: str) -> bool:
        if host == "b.test":
            self.blocked[host] = 1.0
            return True
        return False

    def is_blocked(self, host: str) -> bool:
        return host in self.blocked


def test_spam_gate_sees_pages_and_blocks_links() -> None:
    parsed = {C: ParseResult(C, links=["http://b.test/y", A])}
    d = decide([Outcome(C, "page", page(C))], Findings(parsed), Stages([SpamGateStage(Gate(), None)]))
    assert d.follow == [A] and d.counters["filtered:spam"] == 1 and d.counters["spam:gated_pages"] == 1


def test_a_stage_of_ones_own_plugs_in_through_settings() -> None:
    """tests/toy_stage.py is named in Settings and nowhere else: the stages built for a crawl
    include it, after the built-in ones, and the decision and the fetch actors obey it."""
    from raycrawl.actors.visit.chain import build_stages, fetch_hooks
    from raycrawl.actors.visit.visit_stage import StageContext
    from raycrawl.errors import UserError
    from raycrawl.settings import Settings

    parsed = {A: ParseResult(A, links=["http://a.test/private/x", C], digest=b"d" * 16)}
    outcomes = [Outcome(A, "page", page(A))]
    plain = build_stages(Settings(), StageContext(None))
    assert decide(outcomes, Findings(parsed), plain).follow == ["http://a.test/private/x", C]
    s = Settings(extra_stages=["toy_stage:NoPrivate"])
    stages = build_stages(s, StageContext(None))
    assert [st.name for st in stages.stages][-1] == "no-private"
    d = decide(outcomes, Findings(parsed), stages)
    assert d.follow == [C] and d.counters["filtered:toy-private"] == 1
    assert d.counters["toy:pages-linking-private"] == 1
    assert fetch_hooks(s, None).refuse("http://a.test/private/y", "a.test") == "toy-private"
    assert fetch_hooks(Settings(), None).refuse is None  # (no spam gate configured, no frontier)
    for bad in ("toy_stage:Nope", "no_such_module:X", "json:dumps"):
        with pytest.raises(UserError):
            build_stages(Settings(extra_stages=[bad]), StageContext(None))
        with pytest.raises(UserError):
            build_stages(Settings(stages=[f"{bad}=150"]), StageContext(None))


def test_the_chain_is_a_table_the_settings_change() -> None:
    """The stages run in the order of the chain's table; one ``stages`` entry moves a stage,
    switches one off or adds one of one's own where it says, and a wrong entry is one clear error."""
    from raycrawl.actors.visit.chain import BUILT_IN, build_stages, chain
    from raycrawl.actors.visit.visit_stage import StageContext
    from raycrawl.errors import UserError
    from raycrawl.settings import Settings

    assert [k.name for k in chain(Settings())] == sorted(BUILT_IN, key=lambda n: BUILT_IN[n][0])
    s = Settings(stages=["sitemaps=off", "toy_stage:NoPrivate=150", "scope=250"], follow_sitemaps=True)
    names = [k.name for k in chain(s)]
    assert names[:3] == ["toy_stage:NoPrivate", "operator", "scope"] and "sitemaps" not in names
    built = [st.name for st in build_stages(s, StageContext(None)).stages]
    assert built[0] == "no-private" and "sitemaps" not in built
    assert "sitemaps" in [st.name for st in build_stages(Settings(follow_sitemaps=True), StageContext(None)).stages]
    parsed = {A: ParseResult(A, links=["http://a.test/private/x", C], digest=b"d" * 16)}
    d = decide([Outcome(A, "page", page(A))], Findings(parsed), build_stages(s, StageContext(None)))
    assert d.follow == [C] and d.counters["filtered:toy-private"] == 1
    for bad, said in (("nosuch=off", "no stage 'nosuch'"), ("scope", "expected NAME=POSITION"),
                      ("scope=first", "whole number")):
        with pytest.raises(UserError, match=said):
            chain(Settings(stages=[bad]))


def test_requisites_leave_the_scope_within_the_hop_budget() -> None:
    """Heritrix's transclusion hops (actors/visit/stages/scope.py, Scope.judge_requisite): with scope rules, a
    page's requisites on another host are fetched (hop 1), the url()s of such an out-of-scope
    stylesheet too (hop 2) but not its @imports; links never; deny rules always hold; with
    ``requisite_hops`` 0 requisites obey the scope as links do."""
    from raycrawl.actors.visit.stages.requisites import PageRequisites
    from raycrawl.actors.visit.stages.scope import Scope
    from raycrawl.settings import Settings

    site, cdn = "http://site.test/", "http://cdn.test/"
    page_fr = page(site)
    sheet_fr = FetchResult(url=cdn + "s.css", ip="127.0.0.2", status=200, body=b"x", ctype="text/css", started=1.0,
                           ended=2.0)
    parsed = {site: ParseResult(site, links=[cdn + "about.html"], embeds=[cdn + "s.css", cdn + "logo.png",
                                                                          cdn + "private/x.png"], sheets=[cdn + "s.css"]),
              cdn + "s.css": ParseResult(cdn + "s.css", embeds=[cdn + "more.css", cdn + "font.woff"],
                                         sheets=[cdn + "more.css"])}
    outcomes = [Outcome(site, "page", page_fr), Outcome(cdn + "s.css", "page", sheet_fr)]

    def follow(hops: int) -> list[str]:
        s = Settings(scope_allow_surts=["test,site,"], scope_deny=["/private/"], requisite_hops=hops)
        s.validate()
        d = decide(outcomes, Findings(parsed), Stages([Scope(s), PageRequisites()]))
        return d.follow

    assert follow(2) == [cdn + "s.css", cdn + "logo.png", cdn + "font.woff"]
    assert follow(1) == [cdn + "s.css", cdn + "logo.png"]
    assert follow(0) == []


def test_each_built_in_stage_is_one_module_and_one_line_of_the_table() -> None:
    """actors/visit/stages/ holds one module per built-in stage (its STAGE), and the chain's table
    names each once, under the stage's own name: a new built-in is a module there and a line there."""
    import importlib
    import pkgutil

    from raycrawl.actors.visit import stages
    from raycrawl.actors.visit.chain import BUILT_IN, load_stage

    modules = {m.name for m in pkgutil.iter_modules(stages.__path__)}
    in_table = {path.partition(":")[0].rsplit(".", 1)[1]: name for name, (_, path) in BUILT_IN.items()}
    assert set(in_table) == modules
    for module, name in in_table.items():
        cls = load_stage(BUILT_IN[name][1])
        assert importlib.import_module(f"{stages.__name__}.{module}").STAGE is cls and cls.name == name
