"""attacks/base.py's PNG rows are torchvision's save_image grids, pixel for pixel (issue #47: the
audit no longer imports torchvision to write them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fedattack.attacks.base import save_png_row


@pytest.mark.parametrize("shape", [(5, 1, 28, 28), (1, 1, 28, 28), (3, 3, 32, 32), (1, 3, 8, 8), (2, 28, 28)])
def test_png_row_is_torchvisions_grid(tmp_path: Path, shape: tuple[int, ...]) -> None:
    from torchvision.utils import save_image

    images = torch.rand(shape, generator=torch.Generator().manual_seed(len(shape))) * 1.4 - 0.2
    save_png_row(images, tmp_path / "ours.png")
    save_image(images.clamp(0, 1), tmp_path / "theirs.png", nrow=max(1, len(images)), padding=1, pad_value=1.0)
    ours, theirs = (np.asarray(Image.open(tmp_path / f"{n}.png")) for n in ("ours", "theirs"))
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)
