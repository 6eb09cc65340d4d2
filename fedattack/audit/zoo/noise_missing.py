"""The noise forgotten: clips and averages, adds nothing (e.g. a noise call behind a flag left off)."""

from __future__ import annotations

import torch

from fedattack.audit.zoo import Bug
from fedattack.wire import Message


class NoiseMissing(Bug):
    """clips and averages but adds no noise, while stating sigma's epsilon"""

    name = "bug-noise-missing"

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        with self.using(noise_multiplier=0.0):
            return super().on_receive(uplinks, rnd, gen)
