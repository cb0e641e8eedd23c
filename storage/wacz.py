"""A crawl as one WACZ file (Web Archive Collection Zipped, version 1.1.1): the package
Browsertrix writes and ReplayWeb.page and pywb (``wb-manager add --unpack-wacz``) open.

A ZIP holding

* ``archive/*.warc.gz`` — the crawl's WARC files, byte for byte, *stored* (not deflated again: a
  replay tool reads records at their offsets inside the ZIP);
* ``indexes/index.cdx`` — the CDXJ index of storage/cdxj.py (the captures, sorted);
* ``pages/pages.jsonl`` — a ``json-pages-1.0`` header, then one line per page of the crawl (the
  storage/crawl_pages.py rule, from the link records: URL, first fetch time, title);
* ``datapackage.json`` — a Frictionless data package listing every file with its size and SHA-256,
  and ``datapackage-digest.json`` with the SHA-256 of that (what a signature would sign).

Written by hand rather than with the ``wacz`` package (py-wacz re-indexes the WARC files and pulls in
frictionless and its dependency tree); ``wacz validate`` accepts the result (tests/test_wacz.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.storage.cdxj import write_index
from raycrawl.storage.crawl_dir import layout
from raycrawl.storage.crawl_pages import is_page_record
from raycrawl.storage.link_records import RENDERED_SUBDIR, iter_link_records
from raycrawl.storage.warc import warc_files

WACZ_VERSION = "1.1.1"
_NAME = re.compile(r"[^a-z0-9._/-]")  # a Frictionless resource name's alphabet


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pages_jsonl(crawl_dir: Path, title: str) -> Iterator[str]:
    """The lines of ``pages/pages.jsonl``: the header, then each page's first capture; a page the
    crawl rendered in a browser says so (``rendered``; its title the rendered DOM's when its
    markup had none)."""
    yield json.dumps({"format": "json-pages-1.0", "id": "pages", "title": title}) + "\n"
    rendered = {rec.url: rec.title for rec in iter_link_records(crawl_dir, RENDERED_SUBDIR) if rec.error is None}
    seen: set[str] = set()
    for rec in iter_link_records(crawl_dir):
        if rec.url in seen or not is_page_record(rec):
            continue
        seen.add(rec.url)
        page = {"id": hashlib.sha1(rec.url.encode()).hexdigest()[:24], "url": rec.url, "ts": _iso(rec.time)}
        shown = rendered.get(rec.url)
        if rec.title or shown:
            page["title"] = rec.title or shown
        if shown is not None:
            page["rendered"] = True
        yield json.dumps(page, ensure_ascii=False) + "\n"


def _sha256(path: Path) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    return n, "sha256:" + h.hexdigest()


def default_path(crawl_dir: str | Path) -> Path:
    """Where a crawl's WACZ goes unless told: ``DIR/NAME.wacz``, NAME the directory's name."""
    return Path(crawl_dir) / f"{Path(crawl_dir).resolve().name}.wacz"


def write_wacz(crawl_dir: str | Path, out: str | Path, title: str | None = None) -> dict:
    """Package the crawl in ``crawl_dir`` as ``out`` (replaced atomically); returns the datapackage."""
    from raycrawl import __version__

    crawl_dir, out = Path(crawl_dir), Path(out)
    files = warc_files(layout(crawl_dir).warc)
    if not files:
        raise UserError(f"no WARC files in {layout(crawl_dir).warc}")
    title = title or crawl_dir.resolve().name
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.with_name(out.name + ".parts")
    work.mkdir(exist_ok=True)
    try:
        index, _ = write_index(crawl_dir, work / "index.cdx")
        pages = work / "pages.jsonl"
        with open(pages, "w", encoding="utf-8") as f:
            f.writelines(pages_jsonl(crawl_dir, title))
        members = [(p, f"archive/{p.name}", zipfile.ZIP_STORED) for p in files]
        members += [(index, "indexes/index.cdx", zipfile.ZIP_DEFLATED),
                    (pages, "pages/pages.jsonl", zipfile.ZIP_DEFLATED)]
        resources = []
        for path, name, _ in members:
            size, digest = _sha256(path)
            resources.append({"name": _NAME.sub("-", Path(name).name.lower()), "path": name, "hash": digest,
                              "bytes": size})
        package = {"profile": "data-package", "resources": resources, "title": title,
                   "created": _iso(datetime.now(UTC).timestamp()), "wacz_version": WACZ_VERSION,
                   "software": f"raycrawl {__version__}"}
        package_bytes = json.dumps(package, indent=2).encode()
        digest = {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(package_bytes).hexdigest()}
        tmp = out.with_name(out.name + ".tmp")
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as z:
            for path, name, compression in members:
                z.write(path, name, compress_type=compression)
            z.writestr("datapackage.json", package_bytes, compress_type=zipfile.ZIP_DEFLATED)
            z.writestr("datapackage-digest.json", json.dumps(digest, indent=2), compress_type=zipfile.ZIP_DEFLATED)
        tmp.replace(out)
    finally:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    return package
