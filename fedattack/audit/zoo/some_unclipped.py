"""Some clients skip the clip: a fast path for clients with less than one batch of data
returns their update before clipping (the canary clients, holding one sample, take it)."""

from __future__ import annotations

import math

from fedattack.audit.zoo import Bug
from fedattack.defences._update import gaussian
from fedattack.target import ClientContext
from fedattack.wire import Payload


class SomeUnclipped(Bug):
    """clients with less than one batch of data skip clipping (their update goes out at any norm)"""

    name = "bug-some-unclipped"

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        if ctx.samples is None or ctx.samples >= self.ctx.recipe.batch_size:
            return super().on_uplink(up, down, ctx)
        s = self.settings
        update = self.update_of(up, down)
        if s.noise == "client" and s.noise_multiplier > 0 and update:
            std = s.noise_multiplier * s.clip_norm / math.sqrt(self.ctx.clients_per_round)
            noise = gaussian(update, std, self.client_generator(ctx))
            update = {n: t + noise[n] for n, t in update.items()}
        return self.with_update(up, down, update)
