"""Noise of std sigma instead of sigma x C: the multiplier taken for the standard deviation.

Harmless when C <= 1 (more noise than stated), a privacy bug when C > 1: the noise is C times too
small. So the bug is exposed with C = 8.
"""

from __future__ import annotations

import torch

from fedattack.audit.zoo import Bug
from fedattack.wire import Message


class NoiseUnscaled(Bug):
    """server noise of std sigma, not sigma x C (C times too small when C > 1)"""

    name = "bug-noise-unscaled"
    exposing = {"clip_norm": 8.0}

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        s = self.settings
        with self.using(noise_multiplier=s.noise_multiplier / s.clip_norm):  # std (sigma / C) x C = sigma
            return super().on_receive(uplinks, rnd, gen)
