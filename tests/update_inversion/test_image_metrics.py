"""Matching reconstructions to real images, and the per-image metrics."""

from __future__ import annotations

import numpy as np
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from fedattack.attacks.data_reconstruction.image_metrics import (
    psnr_matrix,
    score_images,
    ssim_window,
)


def test_matching_undoes_a_permutation_and_psnr_agrees_with_scikit_image() -> None:
    gen = torch.Generator().manual_seed(0)
    truth = torch.rand((6, 1, 8, 8), generator=gen)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    noise = torch.linspace(0.01, 0.2, 6)[:, None, None, None]
    recon = (truth[perm] + noise * torch.randn(truth.shape, generator=gen)).clamp(0, 1)
    scores = score_images(recon, truth)
    assert list(perm[scores.recon_index].numpy()) == list(scores.truth_index)
    for i, j, p in zip(scores.recon_index, scores.truth_index, scores.psnr):
        assert abs(p - peak_signal_noise_ratio(truth[j].numpy(), recon[i].numpy(), data_range=1)) < 1e-4
    # noise 0.01 .. 0.2: only the cleanest copies are above 20 dB
    assert 0 < scores.share_recovered < 1
    assert scores.summary()["psnr_mean"] == float(scores.psnr.mean())


def test_ssim_on_small_grey_and_rgb_images() -> None:
    gen = torch.Generator().manual_seed(1)
    grey = torch.rand((1, 8, 8), generator=gen)
    rgb = torch.rand((2, 3, 5, 5), generator=gen)
    assert ssim_window(8, 8) == 7 and ssim_window(5, 6) == 5 and ssim_window(4, 4) == 3
    exact = score_images(grey[None], grey[None])
    assert exact.ssim[0] == 1.0 and exact.psnr[0] == 100.0
    scores = score_images(rgb.flip(0), rgb)
    expected = structural_similarity(rgb[0].permute(1, 2, 0).numpy(), rgb[0].permute(1, 2, 0).numpy(),
                                     data_range=1.0, win_size=5, channel_axis=-1)
    assert np.allclose(scores.ssim, expected)
    other = score_images(rgb[:1], rgb[1:])
    assert other.ssim[0] < 0.5


def test_more_reconstructions_than_images_match_each_image_once() -> None:
    truth = torch.rand((3, 1, 8, 8), generator=torch.Generator().manual_seed(2))
    recon = torch.cat([torch.rand((2, 1, 8, 8), generator=torch.Generator().manual_seed(3)), truth])
    scores = score_images(recon, truth)
    assert sorted(scores.truth_index) == [0, 1, 2]
    assert sorted(scores.recon_index) == [2, 3, 4]
    assert psnr_matrix(recon, truth).shape == (5, 3)
