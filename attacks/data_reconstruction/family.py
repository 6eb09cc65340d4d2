"""The training-data reconstruction family: attacks that output images of the victim's records.

An attack of this family (e.g. inverting the victim's update, Geiping et al. 2020; Zhu et al.
2019; `attacks/data_reconstruction/` holds the pieces) writes `reconstruct(adv, gen) ->
Reconstructions`: images in [0, 1] of the shape of the victim's inputs, as many as it recovered.
The base class owns what such attacks share: matching each reconstruction to the victim's real
training image it resembles most (one to one, the assignment of highest total PSNR) and the
image metrics on matched pairs (PSNR, SSIM by scikit-image, the share above 20 dB), both from
`update_inversion.image_metrics`. Results carry both rows of images (reconstructions, matches).

Model inversion (`inversion`) reconstructs class representatives rather than records and is a
family of its own; it shares only `psnr` below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from fedattack.attacks.base import Adversary, Attack, Scored
from fedattack.attacks.data_reconstruction.image_metrics import RECOVERED_DB, score_images
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.results import Metric

MAX_PSNR = 100.0  # an exact copy: the matching caps PSNR here, so means stay finite
DB = (0.0, MAX_PSNR)
IMAGE_METRICS = (
    Metric(key="psnr_mean", label="PSNR", unit="dB", bounds=DB, primary=True),
    Metric(key="ssim_mean", label="SSIM", bounds=(-1.0, 1.0), digits=3),
    Metric(key="share_recovered", label=f"recovered (PSNR > {RECOVERED_DB:g} dB)", unit="%", scale=100.0,
           bounds=(0.0, 1.0)),
    Metric(key="psnr_median", label="median PSNR", unit="dB", bounds=DB, headline=False),
    Metric(key="ssim_median", label="median SSIM", bounds=(-1.0, 1.0), digits=3, headline=False),
)


@dataclass
class Reconstructions:
    """The attack's guesses: images (N, C, H, W) in [0, 1], and anything to record beside them."""

    images: torch.Tensor
    info: dict[str, Any] = field(default_factory=dict)


class DataReconstruction(Attack):
    """Base of training-data reconstruction attacks: write `reconstruct`."""

    metrics: ClassVar[tuple[Metric, ...]] = IMAGE_METRICS

    def reconstruct(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        raise NotImplementedError

    def run(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        return self.reconstruct(adv, gen)

    def score(self, guesses: Reconstructions, truth: GroundTruth) -> Scored:
        recs, real = guesses.images.detach().clamp(0, 1), truth.members.x
        if len(recs) == 0 or len(real) == 0:
            return Scored(metrics={m.key: float("nan") for m in self.metrics},
                          extra={"reconstruction_match": {**guesses.info, "pairs": []}})
        scores = score_images(recs, real)
        pairs = [[int(i), int(j)] for i, j in zip(scores.recon_index, scores.truth_index)]
        extra = {"reconstruction_match": {**guesses.info, "pairs": pairs, "psnr": scores.psnr.tolist(),
                                          "ssim": scores.ssim.tolist()}}
        images = {"reconstructions": recs[torch.as_tensor(scores.recon_index)],
                  "matched": real[torch.as_tensor(scores.truth_index)]}
        return Scored(metrics=scores.summary(), extra=extra, images=images)
