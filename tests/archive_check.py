"""Does a crawl's archive hold every page websim served, byte for byte, and claim nothing false?

Read with warcio (not raycrawl's own reader), against websim's request log and a local copy of the
model (websim is a pure function of its parameters, so the expected bytes are re-rendered here).
"""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from raycrawl.urls import canonicalize


def served_pages(web, requests) -> set[str]:
    """The URLs of the pages websim answered 200 in ``requests`` (its log), robots.txt aside."""
    return {canonicalize(f"{web.scheme_of(q.host)}://{q.host}{q.target}") for q in requests
            if q.target != "/robots.txt" and q.status == 200}


def stored_pages(objects: dict[str, bytes], work: Path) -> set[str]:
    """The target URIs of the response and revisit records in the WARC files of a stored crawl
    (``objects``: key -> bytes, as :meth:`s3_server.MotoS3.objects` reads them), copied to ``work``."""
    from fastwarc.warc import WarcRecordType

    from raycrawl.storage.warc import iter_records

    work.mkdir()
    for key, data in objects.items():
        if key.startswith("warc/"):
            (work / key[len("warc/"):]).write_bytes(data)
    return {rec.headers["WARC-Target-URI"]
            for _, _, rec in iter_records(work, WarcRecordType.response | WarcRecordType.revisit)}


def unsummarised_pages(objects: dict[str, bytes], work: Path) -> set[str]:
    """The pages of a stored crawl (whole 200 HTML responses, not duplicates: storage/crawl_pages.py)
    per its stored link records, whose summary is in none of its stored spill files."""
    from raycrawl.actors.visit.parser import HTML_TYPES
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.storage.summary_spill import iter_spill, spill_paths

    for key, data in objects.items():
        if key.startswith(("links/", "summaries/spill/")):
            (work / key).parent.mkdir(parents=True, exist_ok=True)
            (work / key).write_bytes(data)
    kept = {r.url for r in iter_link_records(work)
            if r.status == 200 and r.ctype in HTML_TYPES and not r.dup_of and not r.error}
    assert kept, "no page in the stored link records"
    return kept - {r["url"] for r in iter_spill(spill_paths(work))}


def read_archive(warc_dir: Path) -> tuple[dict[str, list[dict]], list[dict]]:
    """(responses by target URI, revisits) of every WARC file; warcio checks every digest."""
    responses: dict[str, list[dict]] = defaultdict(list)
    revisits: list[dict] = []
    for path in sorted(Path(warc_dir).glob("*.warc.gz")):
        with open(path, "rb") as f:
            it = ArchiveIterator(f, check_digests=True)
            for rec in it:
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.rec_headers
                body = rec.content_stream().read()
                assert rec.digest_checker.passed is not False, (path.name, h.get_header("WARC-Target-URI"))
                entry = {"uri": h.get_header("WARC-Target-URI"), "date": h.get_header("WARC-Date"),
                         "payload_digest": h.get_header("WARC-Payload-Digest"), "body": body,
                         "truncated": h.get_header("WARC-Truncated"),
                         "refers_to": h.get_header("WARC-Refers-To-Target-URI"),
                         "refers_date": h.get_header("WARC-Refers-To-Date"),
                         "profile": h.get_header("WARC-Profile"),
                         "duplicate_of": h.get_header("Raycrawl-Duplicate-Of")}
                (responses[entry["uri"]].append if rec.rec_type == "response" else revisits.append)(entry)
    return responses, revisits


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def check_archive(warc_dir: Path, web, params: dict) -> dict[str, int]:
    """Assert the archive's honesty and completeness for a crawl of the running ``web`` (a
    ``websim.Websim`` built with ``params``); returns what was checked."""
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    responses, revisits = read_archive(warc_dir)
    # 1. a revisit claims a byte-identical payload (its referent has that very payload digest), or
    #    answers a 304 to a conditional GET (its referent is in the archive; checked against websim
    #    below)
    for rv in revisits:
        originals = responses.get(rv["refers_to"], [])
        if rv["profile"].endswith("/server-not-modified"):
            assert rv["payload_digest"] is None, rv["uri"]  # no payload to vouch for
            assert any(o["date"] == rv["refers_date"] for o in originals), (
                f"revisit {rv['uri']} refers to {rv['refers_to']} of {rv['refers_date']}, not in the archive")
            continue
        assert rv["profile"].endswith("/identical-payload-digest"), rv["uri"]
        assert any(o["payload_digest"] == rv["payload_digest"] == sha1_b32(o["body"]) for o in originals), (
            f"revisit {rv['uri']} claims the payload of {rv['refers_to']}, which the archive does not hold")
    # 2. every page websim answered with 200 is archived byte for byte (as websim rendered it), and
    #    every 304 it answered is a revisit of a capture holding the bytes it would have sent
    from raycrawl.websim.server import cut_part

    model = WebModel.generate(**{k: v for k, v in params.items() if k not in ("https_hosts", "slow_delay")})
    renderer = Renderer(model, web.port, web.tls_port, frozenset(web.info.get("https_hosts", ())))
    checked = not_modified = cut = 0
    for r in web.requests():
        if r.status != 304:
            continue
        url = canonicalize(f"{web.scheme_of(r.host)}://{r.host}{r.target}")
        host = model.by_name[r.host.rsplit(":", 1)[0]]
        expected = renderer.response(host, host.pages[r.target]).body
        held = [responses_body(responses, rv) for rv in revisits if rv["uri"] == url and rv["payload_digest"] is None]
        assert expected in held, f"{url}: 304 from websim, but no revisit of a capture with the bytes it serves"
        not_modified += 1
    for r in web.requests():
        url = canonicalize(f"{web.scheme_of(r.host)}://{r.host}{r.target}")
        host = model.by_name.get(r.host.rsplit(":", 1)[0])
        page = host.pages.get(r.target) if host is not None else None
        if page is not None and page.kind == "cut":
            # 3. a body the server cut short: every response record of it holds a prefix of what
            #    arrived, says so (WARC-Truncated: disconnect), and never claims the whole page
            whole = renderer.response(host, page).body
            records = responses.get(url, [])
            assert records and all(e["truncated"] == "disconnect" and whole.startswith(e["body"])
                                   and len(e["body"]) < len(whole) for e in records), (
                url, [(e["truncated"], len(e["body"])) for e in records], len(whole))
            assert any(e["body"] == cut_part(whole) for e in records), url  # the bytes that arrived are kept
            assert not [rv for rv in revisits if rv["uri"] == url], url
            cut += 1
            continue
        if r.status != 200:
            continue
        if url is None or page is None or host.trap or page.kind not in ("html", "pdf", "png"):
            continue  # robots files, traps, fault bodies (cut by design) are checked elsewhere
        expected = renderer.response(host, page).body
        stored = [e["body"] for e in responses.get(url, [])]
        stored += [responses_body(responses, rv) for rv in revisits if rv["uri"] == url]
        assert expected in stored, f"{url}: served {len(expected)} bytes, archived {[len(b) for b in stored]}"
        checked += 1
    return {"responses": sum(map(len, responses.values())), "revisits": len(revisits), "pages_checked": checked,
            "not_modified_checked": not_modified, "cut_short_checked": cut,
            "duplicates_kept_whole": sum(1 for es in responses.values() for e in es if e["duplicate_of"])}


def responses_body(responses: dict[str, list[dict]], revisit: dict) -> bytes | None:
    """The payload a revisit stands for: its referent's body with the same digest (a 304's
    server-not-modified revisit: the referent of that date)."""
    for o in responses.get(revisit["refers_to"], []):
        if revisit["payload_digest"] is None and o["date"] == revisit["refers_date"]:
            return o["body"]
        if revisit["payload_digest"] is not None and o["payload_digest"] == revisit["payload_digest"]:
            return o["body"]
    return None
