"""The readings' candidates and their score (issue #50 item 4): a near-duplicate found before the
exact read must not cost the exact read. 80c64d1's `distinct` dropped the later of two candidates
within a cosine of 0.999, so an image first read slightly dimmed (a bin that also held a little of
another image, a trap that fired twice) lost its exact read and counted below 40 dB."""

from __future__ import annotations

import torch

from fedattack.attacks.active._reading import SAME, normalised, ratio_images
from fedattack.attacks.active.readout import VERBATIM_DB, matched
from fedattack.attacks.data_reconstruction.image_metrics import psnr_matrix
from tests.active.conftest import built, digits


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.flatten().double(), b.flatten().double()
    return float(a @ b / (a.norm() * b.norm()))


def test_an_exact_read_after_a_near_duplicate_of_it_is_scored_verbatim() -> None:
    target = built("fedavg", None)[1]
    truth = digits().x_train[:3].float()
    dimmed = 0.95 * truth[0]  # the same direction (cosine 1 before clamping), 5% darker: not verbatim
    assert cosine(dimmed, truth[0]) > SAME
    assert float(psnr_matrix(dimmed[None], truth[:1], cap_db=None)[0, 0]) < VERBATIM_DB
    rows = normalised(torch.stack([dimmed, truth[0], truth[1]]), target).double()
    bias = torch.tensor([0.5, -2.0, 3.0], dtype=torch.float64)  # any factor per unit: the ratio undoes it
    images, info = ratio_images(rows * bias[:, None], bias, target)
    assert len(images) == 3 and info["distinct"] == 2  # the repeat is counted, and kept
    score = matched(images, truth).metrics
    assert score["recovered_40"] == 2 / 3, score  # truth[0] exactly (the dropped read before) and truth[1]
    assert score["recovered_20"] == 2 / 3, score  # the dimmed copy is not matched to truth[2]
