"""Gradient inversion (Geiping, Bauermeister, Dröge, Moeller 2020, "Inverting Gradients"; the
label from the update as iDLG, Zhao et al. 2020): the victim's update read as one gradient.

When the victim's local work is one SGD step, (downlink - uplink) / lr is exactly the gradient
of its batch at the downlink weights, and images whose gradient points the same way (cosine
distance, total-variation prior) are its training images. On a longer run the update is only
the sum of many gradients at moving weights: the attack still treats it as one, which is what
single-gradient attacks do against FedAvg (Dimitrov et al. 2022 report under 10% recovered
there), and says so in the result (`local_steps`); `update-inversion` simulates the run instead.
"""

from __future__ import annotations

import torch

from fedattack.attacks.update_inversion.family import POLISH_RATE, InversionSettings, UpdateInversionFamily
from fedattack.attacks.update_inversion.gradient import MatchSettings, gradient_from_update, invert_gradient_jointly
from fedattack.attacks.update_inversion.joint import Inverted
from fedattack.attacks.update_inversion.problem import VictimUpdate


class GradientInversion(UpdateInversionFamily):
    """Single-step gradient matching on the victim's decoded update (Geiping et al. 2020)."""

    name = "gradient-inversion"
    Settings = InversionSettings

    def invert(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator,
               init: torch.Tensor | None = None) -> Inverted:
        s = self.settings
        visible_start = {k: update.start[k] for k in update.after}
        grad = gradient_from_update(visible_start, update.after, lr=update.recipe.lr)
        steps, rate = (s.iterations, s.step_size) if init is None else (s.polish, s.step_size * POLISH_RATE)
        match = MatchSettings(steps=steps, lr=rate, tv=s.tv, distance=s.distance, restarts=s.restarts)
        return invert_gradient_jointly(update.forward, update.start, grad, labels, update.shape, gen, match,
                                       update.extras, init)
