"""Where the project's reference data lives: ``shared/`` beside the checkout (as in CI), else /work/shared."""

from __future__ import annotations

from pathlib import Path


def _shared_dir() -> Path:
    beside = Path(__file__).resolve().parents[2] / "shared"
    return beside if (beside / "data").is_dir() else Path("/work/shared")


SHARED = _shared_dir()
CNR_2000 = SHARED / "data" / "cnr-2000" / "cnr-2000"
