"""Crawl-like artifacts straight from the websim model (no network) and websim's spam ground truth.

The spam stage reads a crawl directory (``links/*.rec.gz`` + ``warc/*.warc.gz``). For tests and the
benchmark we need crawls of a few hundred hosts with known labels; fetching them over loopback
with politeness delays would take minutes, so :func:`write_model_crawl` writes exactly what a
complete crawl of the model's reachable HTML pages would store — the rendered HTML in WARC
response records and one link record per page (canonical out-links) — using the project's own
writers (``storage/warc.py``, ``storage/link_records.py``). Real crawls produce the same layout.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from pathlib import Path

from raycrawl.exchange import FetchResult
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.link_records import LinkRecord, LinkRecordWriter
from raycrawl.storage.warc import WarcStore
from raycrawl.websim.model import SPAM_ROLES, WebModel
from raycrawl.websim.render import Renderer

log = logging.getLogger(__name__)


def model_labels(model: WebModel) -> dict[str, int]:
    """host -> 1 if websim made it a spam host (link farm, keyword stuffing, copied content), else 0."""
    return {h.name: int(h.role in SPAM_ROLES) for h in model.hosts}


def manifest_labels(manifest_path: str | Path) -> dict[str, int]:
    """The same labels read from a served web's ``manifest.jsonl.gz`` (host records' ``spam``)."""
    from raycrawl.websim.manifest import load_manifest

    m = load_manifest(manifest_path)
    return {name: int(bool(rec.get("spam"))) for name, rec in m.hosts.items()}


def reachable_html(model: WebModel) -> list[tuple[str, str]]:
    """(host, path) of the HTML 200 pages reachable from the seeds by links, in BFS order
    (robots rules ignored: a spam classifier should see every host the web links to)."""
    seen: set[tuple[str, str]] = set()
    order: list[tuple[str, str]] = []
    queue = deque(model.seeds())
    while queue:
        key = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        page = model.page(*key)
        host = model.by_name.get(key[0])
        if page is None or host is None or page.removed_in is not None:
            continue
        if page.kind != "html" or page.status != 200 or host.fault in ("hang", "dead"):
            continue
        order.append(key)
        queue.extend(t for t in page.links if t not in seen)
    return order


def write_model_crawl(model: WebModel, crawl_dir: str | Path, port: int = 8080) -> int:
    """Write ``crawl_dir/warc`` and ``crawl_dir/links`` as a complete crawl of ``model`` served on
    ``port`` would; returns the number of pages written."""
    crawl_dir = Path(crawl_dir)
    renderer = Renderer(model, port)
    warc = WarcStore(layout(crawl_dir).warc, "websim")
    links = LinkRecordWriter(crawl_dir, "websim")
    t = time.time()
    batch: list[LinkRecord] = []
    pages = reachable_html(model)
    for i, (hname, path) in enumerate(pages):
        host, page = model.by_name[hname], model.page(hname, path)
        url = renderer.url(hname, path)
        body = renderer.html(host, page).encode("utf-8")
        fr = FetchResult(url=url, ip=host.ip, status=200, body=body, ctype="text/html", started=t + i * 1e-3,
                         ended=t + i * 1e-3, status_line="HTTP/1.1 200 OK",
                         raw_headers=[(b"Content-Type", b"text/html; charset=utf-8")])
        name, offset = warc.write(fr)
        batch.append(LinkRecord(url, status=200, ctype="text/html", time=fr.ended, ip=host.ip, size=len(body),
                                links=[renderer.url(h, p) for h, p in page.links], warc=(name, offset),
                                epoch=model.epoch))
        if len(batch) >= 1000:
            links.write_batch(batch)
            batch = []
    links.write_batch(batch)
    links.close()
    warc.close()
    log.info("wrote %d pages of %d hosts to %s", len(pages), model.n_hosts, crawl_dir)
    return len(pages)


def write_labels(labels: dict[str, int], path: str | Path) -> Path:
    """A labels file: ``host<TAB>0|1`` per line."""
    path = Path(path)
    path.write_text("".join(f"{h}\t{y}\n" for h, y in sorted(labels.items())))
    return path


def simulate_gated_crawl(model: WebModel, gate=None, port: int = 8080) -> dict:
    """A breadth-first crawl of ``model``'s HTML pages in which every fetched page is shown to
    ``gate`` (a :class:`policies.spam_gate.SpamGate`, or None for no gate) and URLs of blocked
    hosts are no longer fetched — what the workbench does with a blocked host. Returns pages
    fetched from spam / honest hosts and hosts blocked by class."""
    renderer = Renderer(model, port)
    labels = model_labels(model)
    seen: set[tuple[str, str]] = set()
    queue = deque(model.seeds())
    fetched: dict[str, int] = {}
    skipped = 0
    while queue:
        key = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        hname, path = key
        page, host = model.page(hname, path), model.by_name.get(hname)
        if page is None or host is None or page.removed_in is not None or host.fault in ("hang", "dead"):
            continue
        if page.kind != "html" or page.status != 200:
            continue
        if gate is not None and gate.is_blocked(hname):
            skipped += 1
            continue
        fetched[hname] = fetched.get(hname, 0) + 1
        if gate is not None:
            gate.observe(hname, gate.page_features(renderer.html(host, page), hname))
        queue.extend(t for t in page.links if t not in seen)
    blocked = set(gate.blocked) if gate is not None else set()
    return {"pages": sum(fetched.values()), "skipped": skipped,
            "spam_pages": sum(n for h, n in fetched.items() if labels[h]),
            "honest_pages": sum(n for h, n in fetched.items() if not labels[h]),
            "spam_hosts": sum(1 for h in fetched if labels[h]),
            "blocked_spam": sum(1 for h in blocked if labels[h]),
            "blocked_honest": sum(1 for h in blocked if not labels[h]),
            "honest_hosts": sum(1 for h in fetched if not labels[h])}


def gate_training_rows(model: WebModel, query_terms: frozenset[str], port: int = 8080) -> list[dict]:
    """Page rows (host, order, local + shingle features) of a breadth-first crawl of ``model``, in
    crawl order — the crawl-time gate's view, for :func:`policies.spam_gate.train_gate`."""
    from raycrawl.policies.spam_gate import SHINGLE_FEATURES, ShingleMemory, page_feature_vector
    from raycrawl.tasks.spam_features import LOCAL_FEATURES

    feats = list(LOCAL_FEATURES + SHINGLE_FEATURES)
    renderer = Renderer(model, port)
    memory = ShingleMemory()
    order: dict[str, int] = {}
    rows = []
    for hname, path in reachable_html(model):
        x = page_feature_vector(renderer.html(model.by_name[hname], model.page(hname, path)), hname, query_terms,
                                memory, feats)
        rows.append({"host": hname, "order": order.setdefault(hname, 0), **dict(zip(feats, x.tolist(), strict=True))})
        order[hname] += 1
    return rows
