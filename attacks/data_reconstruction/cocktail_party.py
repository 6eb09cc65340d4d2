"""`cocktail-party`: the victim's images unmixed from its first dense layer's update by
independent component analysis (Kariyappa et al., ICML 2023; the separation is in `cocktail`).

It reads what the eavesdropper or the server sees of one round: the victim's decoded uplink and
the downlink it trained from, whose difference at a first layer that is fully connected on the
pixels is A X, one row of X per training image, for one aggregated gradient step and for a FedAvg
run of any number of steps alike. It needs no labels, no simulation of the local run and no
optimiser from noise: one FastICA of the update, seconds where update inversion takes minutes,
and it reaches clients of hundreds to thousands of images wherever the layer has more units than
the client has images and the images fewer pixels than that (`cocktail.unmixable`). It does not
apply through convolutions (the paper's feature inversion after the unmixing is not written
here). In the default audit it ranks below `update-inversion`, whose first-layer reading recovers
more of the small MNIST clients both apply to, and it `complements` it: a different reading, so
the audit runs it too wherever it applies and the time left allows (docs/privacy.md, "The
cocktail party attack"), and its plan says why where it does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedattack.attacks.base import Adversary, AuditRole, NotApplicable
from fedattack.attacks.data_reconstruction.cocktail import PixelPrior, separate, unmixable
from fedattack.attacks.data_reconstruction.cost import scoring_cost
from fedattack.attacks.data_reconstruction.family import DataReconstruction, Reconstructions
from fedattack.attacks.data_reconstruction.levels import pixel_normalisation
from fedattack.attacks.data_reconstruction.problem import victim_update
from fedattack.attacks.data_reconstruction.unmix import first_layer_update
from fedattack.attacks.planning.cost import Cost, Workload
from fedattack.options import one_of

CONTRASTS = ("edges", "pixels")
FLOP_SECONDS = 2e-9  # one multiply-add of FastICA's dense algebra on one core (measured order, 2 cores busy)
ITERATIONS = 150  # FastICA's iterations a call is costed for (64-1,024 MNIST/CIFAR-10 images: 50-160)


@dataclass(frozen=True, kw_only=True)
class CocktailSettings:
    """contrast: where FastICA measures non-Gaussianity, `edges` (the components' neighbour
    differences; a linear map that commutes with the mixing) or `pixels` (the components
    themselves, as the paper writes it)."""

    contrast: str = "edges"

    def __post_init__(self) -> None:
        one_of(self.contrast, CONTRASTS, "contrast")


class CocktailParty(DataReconstruction):
    """Independent component analysis of the victim's first dense layer's update."""

    name = "cocktail-party"
    Settings = CocktailSettings
    # below update-inversion on the small MNIST clients both take, and beside it, not after it:
    # ICA recovers what the linear programs cannot reach (docs/privacy.md, "The cocktail party attack")
    audit = AuditRole("reconstruction", strength=15, complements=True)

    def reconstruct(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        update = victim_update(adv, adaptive_selection=False)
        layer = first_layer_update(update.start, update.after, update.shape)
        if layer is None:
            raise NotApplicable("the model's first layer is not fully connected on the pixels (the unmixing "
                                "reads a dense layer's update)")
        n, shape = update.num_samples, tuple(update.shape)
        aux = adv.knowledge.aux
        prior = PixelPrior.of(aux.x.numpy() if len(aux) else np.zeros((0, *shape)))
        norm = update.target.ctx.normalization
        scale = pixel_normalisation(norm.mean, norm.std, shape)[1] if norm is not None else None
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        found = separate(layer.weight.numpy(), n, seed, prior, shape, self.settings.contrast, scale)
        if found.images is None:
            raise NotApplicable(found.note)
        images = torch.as_tensor(found.images, dtype=torch.float32).view(n, *shape)
        return Reconstructions(images, {**update.notes, "inverted_by": found.note,
                                        "pixel_prior": vars(prior)})

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        units, pixels = work.first_layer or (0, work.probe.input_numel)
        n, samples = work.samples, 2 * pixels  # the differences: two per pixel
        flops = samples * units * min(samples, units) + ITERATIONS * 2 * n * n * samples
        memory = 8 * (3 * units * samples + 4 * n * samples)
        return Cost(flops * FLOP_SECONDS, memory, f"FastICA of a {units:,} x {samples:,} update into {n:,} images") \
            + scoring_cost(work)

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        if work.first_layer is None:
            return "the model's first layer is not fully connected on the pixels"
        units, pixels = work.first_layer
        return unmixable(units, pixels, work.samples) or {}

