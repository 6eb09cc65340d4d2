"""Gradient inversion (Geiping, Bauermeister, Dröge, Moeller 2020, "Inverting Gradients"; the
label from the update as iDLG, Zhao et al. 2020): the victim's update read as one gradient.

When the victim's local work is one SGD step, (downlink - uplink) / lr is exactly the gradient
of its batch at the downlink weights, and images whose gradient points the same way (cosine
distance, total-variation prior) are its training images. On a longer run the update is only
the sum of many gradients at moving weights: the attack still treats it as one, which is what
single-gradient attacks do against FedAvg (Dimitrov et al. 2022 report under 10% recovered
there), and says so in the result (`local_steps`); `update-inversion` simulates the run instead.
The default audit runs it only where the local work is one step.

Its memory grows with the victim's images (every image's gradient graph at once); within a
budget it matches `Adversary.chunk` images at a time (`gradient.chunked_backward`: the same
loss and gradients, one more pass without a graph).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from fedattack.attacks.base import AuditRole
from fedattack.attacks.data_reconstruction.cost import first_layer_applies, scoring_cost, unmix_cost
from fedattack.attacks.data_reconstruction.gradient import MatchSettings, gradient_from_update, invert_gradient_jointly
from fedattack.attacks.data_reconstruction.inversion_family import POLISH_RATE, InversionSettings, UpdateInversionFamily
from fedattack.attacks.data_reconstruction.joint import Inverted
from fedattack.attacks.data_reconstruction.problem import VictimUpdate
from fedattack.attacks.data_reconstruction.units import MatchingUnits
from fedattack.attacks.planning.cost import GRAPH_PEAK, Cost, Workload, cheaper_setting


def images_cost(work: Workload, iterations: int, restarts: int, chunk: int | None) -> Cost:
    """`iterations` x `restarts` matching steps over every image, `chunk` images' graph at once
    (a first pass without a graph then costs about a forward and backward more per image)."""
    u, n = work.probe.unit(MatchingUnits), work.samples
    c = min(chunk or n, n)
    per_image = u.second_seconds + (u.grad_seconds if c < n else 0.0)
    per_iteration = math.ceil(n / c) * u.second_fixed_seconds + n * per_image
    memory = int(GRAPH_PEAK * (c * u.second_bytes + u.second_fixed_bytes)) + 6 * n * work.probe.input_numel * 4
    return Cost(restarts * iterations * per_iteration, memory, f"{iterations} iterations x {n:,} images")


class GradientInversion(UpdateInversionFamily):
    """Single-step gradient matching on the victim's decoded update (Geiping et al. 2020)."""

    name = "gradient-inversion"
    Settings = InversionSettings
    audit = AuditRole("reconstruction", strength=10)
    chunk_unit = "images"

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        if s.start == "first-layer" and not first_layer_applies(work):
            return unmix_cost(work, s.programs) + scoring_cost(work)
        return images_cost(work, s.iterations, s.restarts, chunk) + scoring_cost(work)

    def chunks(self, work: Workload) -> int:
        return work.samples

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "iterations", [100, 30, 10])

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        """Only where the victim's update is one gradient (one local step): otherwise
        `update-inversion` is the attack that fits the run."""
        steps = work.local_steps()
        if steps != 1:
            return f"the victim's update is {steps:,} local steps, not one gradient (update-inversion simulates them)"
        return {} if first_layer_applies(work) else {"start": "first-layer"}

    def invert(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator,
               init: torch.Tensor | None = None) -> Inverted:
        s = self.settings
        visible_start = {k: update.start[k] for k in update.after}
        grad = gradient_from_update(visible_start, update.after, lr=update.recipe.lr)
        steps, rate = (s.iterations, s.step_size) if init is None else (s.polish, s.step_size * POLISH_RATE)
        match = MatchSettings(steps=steps, lr=rate, tv=s.tv, distance=s.distance, restarts=s.restarts,
                              chunk=self._chunk)
        return invert_gradient_jointly(update.forward, update.start, grad, labels, update.shape, gen, match,
                                       update.extras, init)
