"""argparse types shared by the commands: a bad value is argparse's one-line error and exit 2; and
the check of an object-store URL, which settings and the object store share."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from raycrawl.errors import UserError


def non_negative_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0: {s!r}")
    return v


def seconds(s: str) -> float:
    """A finite, non-negative number (``inf`` and ``nan`` are not durations)."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {s!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0: {s!r}")
    return v


def non_negative_float(s: str) -> float:
    try:
        return seconds(s)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0: {s!r}") from None


def port(s: str) -> int:
    """A TCP port, 0 meaning "any free one"."""
    v = non_negative_int(s)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0-65535): {s!r}")
    return v


def comma_list(s: str) -> list[str]:
    """``a,b,c`` → ["a", "b", "c"] (blanks dropped)."""
    return [v.strip() for v in s.split(",") if v.strip()]


def check_store_url(url: str, name: str = "the object store") -> str:
    """``url`` (``s3://bucket[/prefix]``) without a trailing slash, or a one-line error naming ``name``."""
    if not url.startswith("s3://"):
        raise UserError(f"{name}: not an object-store URL (s3://bucket/prefix): {url!r}")
    if not url[len("s3://"):].split("/", 1)[0]:
        raise UserError(f"{name}: no bucket in {url!r} (s3://bucket/prefix)")
    return url.rstrip("/")


class StoreURL(str):
    """A crawl directory named by its object-store URL (``s3://bucket/prefix``): the CLI runs the
    command on a local copy and puts the command's outputs back (core/cli.py)."""


def crawl_dir(s: str) -> Path | StoreURL:
    """A crawl directory: a local path, or the ``s3://`` URL a crawl's ``--out-store`` named."""
    return StoreURL(s.rstrip("/")) if s.startswith("s3://") else Path(s)
