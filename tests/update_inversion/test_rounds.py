"""A client with more images than its first layer has units, seen over several rounds (#33 item
4): one round's update spans too few directions to hold any image; the rounds folded together
span them all, and the images unmix from that, as from one round of a wide enough layer.
(Digits, 8 images on 5 units: few enough that the 8x8 images are extreme rays of their span.)"""

from __future__ import annotations

import math
import re

import numpy as np
import torch
import torch.nn.functional as F

from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.rounds import StackedLayer
from fedattack.attacks.data_reconstruction.unmix import FirstLayer, Search, span_rank, unmix

UNITS, IMAGES = 5, 8


def round_update(x: torch.Tensor, y: torch.Tensor, seed: int, units: int = UNITS) -> FirstLayer:
    """One round's first-layer update of a 64-`units`-10 MLP at fresh weights (the global model
    moves between rounds), one SGD step on the same images: dW = A_r X, db = A_r 1."""
    gen = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(units, 64, generator=gen) / 8).requires_grad_(True)
    b1 = (0.1 * torch.randn(units, generator=gen)).requires_grad_(True)
    w2 = torch.randn(10, units, generator=gen) / math.sqrt(units)
    loss = F.cross_entropy((x.flatten(1) @ w1.T + b1).relu() @ w2.T, y)
    dw, db = torch.autograd.grad(loss, [w1, b1])
    return FirstLayer(-dw.double(), -db.double())


def test_rounds_folded_together_span_the_images_and_unmix(digits: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = digits[0][:IMAGES], digits[1][:IMAGES]
    rounds = [round_update(x, y, seed) for seed in range(4)]
    one = unmix(rounds[0], IMAGES, (1, 8, 8), torch.Generator().manual_seed(0), Search(levels=16))
    assert one.images is None and re.search(rf"spans \d+ directions, fewer than the {IMAGES} images", one.note)
    stacked = StackedLayer(64)
    for r, layer in enumerate(rounds):
        stacked.add(layer, r + 1)
    folded = stacked.layer()
    assert folded is not None and folded.weight.shape[0] <= 65 and stacked.rounds == [1, 2, 3, 4]
    whole = np.vstack([np.hstack([u.weight.numpy(), u.bias.numpy()[:, None]]) / np.linalg.norm(
        np.hstack([u.weight.numpy(), u.bias.numpy()[:, None]])) for u in rounds])  # type: ignore[union-attr]
    kept = np.hstack([folded.weight.numpy(), folded.bias.numpy()[:, None]])  # type: ignore[union-attr]
    assert np.allclose(kept.T @ kept, whole.T @ whole, atol=1e-10)  # the fold is a rotation: nothing lost
    assert span_rank(folded.weight.numpy()) == IMAGES
    images = unmix(folded, IMAGES, (1, 8, 8), torch.Generator().manual_seed(0), Search(levels=16)).images
    assert images is not None
    share = score_images(images, x).share_recovered
    wide = unmix(round_update(x, y, 0, units=64), IMAGES, (1, 8, 8), torch.Generator().manual_seed(0),
                 Search(levels=16)).images
    assert wide is not None
    print(f"{IMAGES} images, {UNITS} units, 4 rounds: {share:.2f} above 20 dB; one round of 64 units: "
          f"{score_images(wide, x).share_recovered:.2f}")
    assert share >= 0.5


def test_images_that_light_every_pixel_between_them_do_not_unmix(digits: tuple[torch.Tensor, torch.Tensor]) -> None:
    """More images than the pixels they light: their span is every image there, whatever the rounds."""
    x = digits[0][:80]
    lit = int((x.flatten(1) > 0).any(0).sum())
    stacked = StackedLayer(64)
    for seed in range(8):
        stacked.add(round_update(x, digits[1][:80], seed), seed)
    folded = stacked.layer()
    assert folded is not None
    out = unmix(folded, 80, (1, 8, 8), torch.Generator().manual_seed(0), Search(levels=16))
    assert out.images is None and lit < 80 and "80 images span all" in out.note
