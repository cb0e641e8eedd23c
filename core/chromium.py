"""Which Chromium a crawl renders with (issue 52): the system's, never one downloaded."""

from __future__ import annotations

import shutil

from raycrawl.errors import UserError

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser(name: str | None = None) -> str:
    """The Chromium to drive: ``name`` (a path or a command), else the first of :data:`BROWSERS` on PATH."""
    for candidate in [name] if name else BROWSERS:
        path = shutil.which(candidate) if candidate else None
        if path:
            return path
    raise UserError(f"no Chromium found ({name or ', '.join(BROWSERS)}): install Debian's chromium, or name one "
                    "with --chromium")
