"""Numeric settings read from the environment by actors (which take no command-line arguments):
a local cluster's actors inherit them, a joined cluster's have them forwarded (core/ray_start.py)."""

from __future__ import annotations

import os


def env_seconds(name: str, default: float, floor: float) -> float:
    """``name``'s value in seconds, at least ``floor``; ``default`` when unset or not a number."""
    try:
        return max(floor, float(os.environ.get(name, default)))
    except ValueError:
        return default
