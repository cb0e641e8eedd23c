"""A PNG a command wrote is a real picture: a PNG file of a sensible size that is not one flat colour."""

from __future__ import annotations

from pathlib import Path


def assert_picture(path: Path, min_side: int = 200) -> None:
    import matplotlib.image as mpimg
    import numpy as np

    assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    pixels = mpimg.imread(path)
    assert min(pixels.shape[:2]) >= min_side, (path, pixels.shape)
    assert float(np.std(pixels[..., :3])) > 0.01, f"{path} is a flat image"
    # more than a frame: the drawn colours cover a visible share of the picture
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 20, f"{path} has almost nothing drawn"
