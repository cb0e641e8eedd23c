"""Replacing a file atomically: write a temporary file beside it, then rename it over the target,
so a crash leaves the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from raycrawl.durable import sync_dir, sync_file


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


def replace_bytes(path: str | Path, data: bytes, *, durable: bool = False) -> None:
    """Replace ``path``'s content with ``data``; ``durable``: on disk before this returns (the new
    bytes synced before the rename, the directory after it), not only safe from a process kill."""
    with replacing(path) as tmp:
        if not durable:
            tmp.write_bytes(data)
        else:
            with open(tmp, "wb") as f:
                f.write(data)
                sync_file(f)
    if durable:
        sync_dir(Path(path).parent)
