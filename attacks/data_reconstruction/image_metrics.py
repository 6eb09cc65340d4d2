"""Scoring reconstructions against the victim's real images: match first, then measure.

A reconstruction comes without an index (the batch order is lost, and multi-step inversion
returns images in its own order), so each is paired with the real image it resembles most by a
linear assignment maximising total PSNR; then PSNR and SSIM per matched pair, and the share above
20 dB, the threshold the federated-learning literature calls "recovered" (Dimitrov et al. 2022).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

RECOVERED_DB = 20.0


@dataclass(frozen=True)
class ImageScores:
    """One entry per matched pair (reconstruction recon_index[i] <-> real image truth_index[i]).

    PSNR is capped at 100 dB (an exact copy) so means stay finite."""

    recon_index: np.ndarray
    truth_index: np.ndarray
    psnr: np.ndarray
    ssim: np.ndarray

    @property
    def share_recovered(self) -> float:
        return float((self.psnr > RECOVERED_DB).mean()) if len(self.psnr) else 0.0

    def summary(self) -> dict[str, float]:
        return {"psnr_mean": float(self.psnr.mean()), "psnr_median": float(np.median(self.psnr)),
                "ssim_mean": float(self.ssim.mean()), "ssim_median": float(np.median(self.ssim)),
                "share_recovered": self.share_recovered}


CHUNK_FLOATS = 2**24  # the pairwise differences held at once (64 MB): thousands of images x thousands


CAP_DB = 100.0  # an exact copy: PSNR is capped here so means stay finite


def psnr_matrix(recon: torch.Tensor, truth: torch.Tensor, cap_db: float | None = CAP_DB) -> np.ndarray:
    """PSNR in dB (data range 1) of every reconstruction against every real image: the project's
    one PSNR. The mean squared difference is taken in float64 as scikit-image's
    `peak_signal_noise_ratio` takes it for one pair (the same bits), capped at `cap_db` (None:
    an exact copy is infinite), batched over as many reconstructions at a time as keep the
    pairwise differences within `CHUNK_FLOATS` (all at once, 2,400 MNIST images against 2,400
    held 36 GB)."""
    a = recon.detach().flatten(1).double().cpu().numpy()
    b = truth.detach().flatten(1).double().cpu().numpy()
    rows = max(1, CHUNK_FLOATS // max(1, b.shape[0] * b.shape[1]))
    mse = (np.concatenate([((a[i:i + rows, None, :] - b[None, :, :]) ** 2).mean(axis=2)
                           for i in range(0, len(a), rows)]) if len(a) else np.zeros((0, len(b))))
    with np.errstate(divide="ignore"):
        table = 10 * np.log10(1.0 / mse)
    return table if cap_db is None else np.minimum(table, cap_db)


def psnr(reference: torch.Tensor, image: torch.Tensor) -> float:
    """PSNR in dB of `image` against `reference`, pixels in [0, 1] (uncapped, as scikit-image's)."""
    return float(psnr_matrix(image[None], reference[None], cap_db=None)[0, 0])


def assignment(score: np.ndarray, maximize: bool) -> tuple[np.ndarray, np.ndarray]:
    """scipy's linear assignment (min(n, m) pairs), imported late: attack discovery stays light."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(score, maximize=maximize)
    return np.asarray(rows), np.asarray(cols)


def match(recon: torch.Tensor, truth: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Indices (recon_i, truth_j) of the assignment maximising total PSNR."""
    return assignment(psnr_matrix(recon, truth), maximize=True)


def ssim_window(height: int, width: int) -> int:
    """scikit-image's default 7, shrunk to the largest odd size that fits a small image."""
    side = min(7, height, width)
    return side if side % 2 else side - 1


def ssim(a: torch.Tensor, b: torch.Tensor) -> float:
    """SSIM of two (C, H, W) images in [0, 1]; channels last for RGB."""
    from skimage.metrics import (
        structural_similarity,  # deferred: attack discovery stays light
    )

    x, y = a.detach().double().cpu().numpy(), b.detach().double().cpu().numpy()
    win = ssim_window(x.shape[-2], x.shape[-1])
    if x.shape[0] == 1:
        return float(structural_similarity(x[0], y[0], data_range=1.0, win_size=win))
    return float(structural_similarity(np.moveaxis(x, 0, -1), np.moveaxis(y, 0, -1), data_range=1.0,
                                       win_size=win, channel_axis=-1))


def score_images(recon: torch.Tensor, truth: torch.Tensor) -> ImageScores:
    """Match reconstructions (N, C, H, W) to the real images (M, C, H, W), then score each pair."""
    rows, cols = match(recon, truth)
    psnr = psnr_matrix(recon, truth)[rows, cols]
    ssims = np.array([ssim(recon[i], truth[j]) for i, j in zip(rows, cols)])
    return ImageScores(rows, cols, psnr, ssims)
