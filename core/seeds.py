"""The seeds file: one URL per line, ``#`` comments and blank lines skipped."""

from __future__ import annotations

import logging
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.urls import canonicalize

log = logging.getLogger(__name__)


def seed_lines(path: Path) -> list[str]:
    """The lines of a seeds file that name a URL: stripped, without blank lines and ``#`` comments."""
    return [s for line in path.read_text(errors="replace").splitlines() if (s := line.strip()) and not s.startswith("#")]


def read_seeds(path: str | Path) -> list[str]:
    """Canonical seed URLs of a seeds file. A file with no valid URL is a UserError."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"seeds file not found: {p}")
    seeds, bad = [], 0
    for line in seed_lines(p):
        url = canonicalize(line)
        if url is None:
            bad += 1
            log.warning("seeds: ignoring %r (not an http(s) URL)", line)
        else:
            seeds.append(url)
    if not seeds:
        raise UserError(f"no valid http(s) URL in seeds file {p}" + (f" ({bad} invalid lines)" if bad else ""))
    return seeds
