"""Replacing a file atomically: write a temporary file beside it, then rename it over the target,
so a crash leaves the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yields the temporary path to write; on a normal exit it replaces ``path``, on an exception
    it is removed (no ``.tmp`` left behind) and the exception goes on."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def replace_bytes(path: str | Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)
