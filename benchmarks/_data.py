"""Reference data for the benchmarks: ``shared/`` beside the checkout, else /work/shared."""

from pathlib import Path

_beside = Path(__file__).resolve().parents[2] / "shared"
SHARED = _beside if (_beside / "data").is_dir() else Path("/work/shared")
CNR_2000 = str(SHARED / "data" / "cnr-2000" / "cnr-2000")
