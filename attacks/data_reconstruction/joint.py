"""Inputs of the model that the adversary does not observe but optimises with the images.

A method can keep part of its model off the wire: WAFFLe's per-client factor selection b (a
vector in [0, 1] per factorised layer) turns the uplinked dictionary into the client's weights.
The reconstruction strategies make fixed guesses of it; the adaptive attacker instead treats a
relaxed selection as one more unknown, optimised jointly with the images: whichever b makes the
simulated update look most like the recorded one. `Extras` carries such inputs: `fixed` ones
(held at the strategy's guess) and `free` ones (values in (0, 1), optimised as logits so that
Adam never leaves the box, as the images are). The simulated client never trains either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from fedattack.attacks.data_reconstruction.objectives import State

EDGE = 0.02  # a free value starts at least this far from 0 and 1 (finite logits)


@dataclass(frozen=True)
class Extras:
    """Model inputs beside the trained parameters: held constant, or optimised (in (0, 1))."""

    fixed: Mapping[str, torch.Tensor] = field(default_factory=dict)
    free: Mapping[str, torch.Tensor] = field(default_factory=dict)

    def latents(self) -> dict[str, torch.Tensor]:
        """Leaf logits of the free values, to hand to the optimiser beside the image latent."""
        return {k: torch.logit(v.detach().clamp(EDGE, 1 - EDGE)).requires_grad_(True)
                for k, v in self.free.items()}

    def initial(self) -> State:
        """Every extra input at its starting value, without graph."""
        return {k: v.detach() for k, v in {**self.fixed, **self.free}.items()}

    def values(self, latents: Mapping[str, torch.Tensor]) -> State:
        """Every extra input as the model reads it (free ones through the sigmoid, with graph)."""
        out = {k: v.detach() for k, v in self.fixed.items()}
        out.update({k: torch.sigmoid(z) for k, z in latents.items()})
        return out


@dataclass(frozen=True)
class Inverted:
    """What an inversion found: images (N, C, H, W) in [0, 1], the free extras' final values,
    and the final matching loss (lower: the simulated update matches the recorded one better)."""

    images: torch.Tensor
    extras: State
    loss: float


def best_of(candidates: list[Inverted]) -> Inverted:
    """The restart of lowest final loss (the first on ties: deterministic)."""
    return min(candidates, key=lambda c: c.loss)
