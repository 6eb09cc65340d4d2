"""An example defence, written as a new contributor would: Laplace noise on each client's update.

Every coordinate of the update (what the method declares it to be: `Defence.update_of`, for most
methods the uplink minus the downlink) gets independent Laplace(0, scale) noise before it leaves
the client, from the defence's own generator for that client and round, so the run stays
reproducible. It wraps any method from the command line:
    fedattack train --plugin laplace_defence.py --defence laplace:scale=0.01 ...
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.defences import Defence
from fedattack.target import ClientContext
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class LaplaceSettings:
    """scale: the Laplace noise's scale b (its standard deviation is b sqrt 2)."""

    scale: float = 0.01


class LaplaceNoise(Defence):
    """Adds Laplace(0, scale) noise to every coordinate of each client's update."""

    name = "laplace"
    Settings = LaplaceSettings

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        gen, b = self.client_generator(ctx), self.settings.scale
        noisy = {}
        for n, u in self.update_of(up, down).items():
            centred = torch.rand(u.shape, generator=gen, dtype=u.dtype) - 0.5  # inverse CDF
            noisy[n] = u - b * centred.sign() * torch.log1p(-2 * centred.abs())
        return self.with_update(up, down, noisy)
