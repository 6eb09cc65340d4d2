"""Clipping after aggregation: the server averages the raw updates, clips the average to C and
adds the noise a mean of clipped updates would get (sigma x C / m). One client can then move
the average by up to 2C, not 2C / m: the noise is m times too small."""

from __future__ import annotations

import torch

from fedattack.audit.zoo import Bug
from fedattack.defences._update import clipped, gaussian, l2_norm, summed
from fedattack.target import ClientContext
from fedattack.wire import Message, Payload


class ClipAfterAggregation(Bug):
    """the average of unclipped updates is clipped to C, with the noise of a mean of clipped ones"""

    name = "bug-clip-after-aggregation"
    broadcast: dict[str, torch.Tensor]

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        self.broadcast = dict(down)  # the server knows what it sent (one model for every client)
        return up

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        names = [n for n, t in uplinks[0].payload.items() if t.is_floating_point()] if uplinks else []
        if not names:
            return uplinks
        s, down = self.settings, self.broadcast
        mean = {n: summed([m.payload[n] for m in uplinks]) / len(uplinks) - down[n] for n in names}
        if l2_norm(mean) > s.clip_norm:
            mean = clipped(mean, s.clip_norm)
        noise = gaussian(mean, s.noise_multiplier * s.clip_norm / len(uplinks), gen)
        model = {n: down[n] + mean[n] + noise[n] for n in names}
        return [Message(m.round, m.sender, m.receiver, m.kind, {**m.payload, **model}, m.samples)
                for m in uplinks]
