"""Java ``.properties`` files, as WebGraph writes a graph's ``basename.properties``."""

from __future__ import annotations

from pathlib import Path

from raycrawl.errors import UserError


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java ``.properties`` file as a dict (comments and blank lines skipped)."""
    props: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="latin-1")
    except OSError as e:
        raise UserError(f"cannot read graph properties {path}: {e.strerror or e}") from e
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        props[key.strip()] = value.strip()
    return props
