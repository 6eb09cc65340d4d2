"""Client-side noise added to the raw update, then the clip: the clip shrinks the noise too."""

from __future__ import annotations

import math

from fedattack.audit.zoo import Bug
from fedattack.defences._update import clipped, gaussian, l2_norm
from fedattack.target import ClientContext
from fedattack.wire import Payload


class NoiseBeforeClip(Bug):
    """each client noises its raw update and clips afterwards, so a large update drowns its noise"""

    name = "bug-noise-before-clip"
    exposing = {"noise": "client"}

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        s = self.settings
        update = self.update_of(up, down)
        if not update:
            return up
        std = s.noise_multiplier * s.clip_norm / math.sqrt(self.ctx.clients_per_round)
        noise = gaussian(update, std, self.client_generator(ctx))
        noisy = {n: t + noise[n] for n, t in update.items()}
        if l2_norm(noisy) > s.clip_norm:
            noisy = clipped(noisy, s.clip_norm)
        return self.with_update(up, down, noisy)
