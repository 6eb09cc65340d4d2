"""Noise calibrated for the mean added to the sum: std sigma x C / m on the sum, then divided by m."""

from __future__ import annotations

import torch

from fedattack.audit.zoo import Bug
from fedattack.wire import Message


class NoiseDividedTwice(Bug):
    """noise of std sigma x C / m added to the sum, which is then divided by m (m times too small)"""

    name = "bug-noise-divided-twice"

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        s = self.settings
        with self.using(noise_multiplier=s.noise_multiplier / max(1, len(uplinks))):
            return super().on_receive(uplinks, rnd, gen)
