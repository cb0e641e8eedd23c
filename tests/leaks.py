"""Where a secret leaked: the files of a crawl's directory that hold it, gzip members (WARC and link
records) read decompressed as well as raw."""

from __future__ import annotations

import zlib
from pathlib import Path


def contents(path: Path) -> bytes:
    """A file's bytes, and if it is gzip (members back to back) its decompressed bytes as well."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        out, rest = [], data
        while rest:
            d = zlib.decompressobj(wbits=31)
            try:
                out.append(d.decompress(rest))
            except zlib.error:
                break
            rest = d.unused_data
        data += b"".join(out)
    return data


def files_holding(root: Path, *needles: bytes) -> list[str]:
    """The files under ``root`` whose bytes hold any of ``needles``."""
    return [str(p) for p in root.rglob("*") if p.is_file() and any(n in contents(p) for n in needles)]
