"""Test-only defence plugins: DP-FedAvg with a planted bug, still claiming the correct epsilon.

Loaded by tests/defences/test_audit.py through `--plugin`'s loader and forgotten afterwards
(the `isolated_registries` fixture), so no other test sees them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from fedattack.defences._update import clipped, gaussian, l2_norm, update_of, with_update
from fedattack.defences.dp_fedavg import DPFedAvg, DPSettings
from fedattack.target import ClientContext
from fedattack.wire import Message, Payload


class NoiselessDPFedAvg(DPFedAvg):
    """Clips, averages, and forgets the noise; its accounting still states sigma's epsilon."""

    name = "planted-noiseless-dp"

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        names = [n for n, t in uplinks[0].payload.items() if t.is_floating_point()]
        mean = {n: sum((m.payload[n] for m in uplinks), torch.zeros(())) / len(uplinks) for n in names}
        return [Message(m.round, m.sender, m.receiver, m.kind, {**m.payload, **mean}, m.samples)
                for m in uplinks]


class ClipAfterNoiseDPFedAvg(DPFedAvg):
    """Client-side noise added to the raw update, *then* clipped: the clip shrinks the noise."""

    name = "planted-clip-after-noise-dp"

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        s = self.settings
        update = update_of(up, down)
        std = s.noise_multiplier * s.clip_norm / math.sqrt(self.ctx.clients_per_round)
        noise = gaussian(update, std, self.client_generator(ctx))
        noisy = {n: t + noise[n] for n, t in update.items()}
        if l2_norm(noisy) > s.clip_norm:
            noisy = clipped(noisy, s.clip_norm)
        return with_update(up, down, noisy)


@dataclass(frozen=True, kw_only=True)
class WeakNoiseSettings(DPSettings):
    """weakness: how many times too small the server's noise is (the claim keeps sigma's epsilon)."""

    weakness: float = 2.0


class WeakNoiseDPFedAvg(DPFedAvg):
    """Server noise sigma * C / weakness, accounted for as sigma * C: noise k times too small."""

    name = "planted-weak-noise-dp"
    Settings = WeakNoiseSettings

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        claimed = self.settings
        self.settings = dataclasses.replace(claimed, noise_multiplier=claimed.noise_multiplier / claimed.weakness)
        try:
            return super().on_receive(uplinks, rnd, gen)
        finally:
            self.settings = claimed
