"""A user's own active threat model, in one file (`fedattack train --plugin this.py --active quiet-units`).

The server keeps the honest weights but lowers every unit's bias of the first dense layer it sends
(`fc1`), so each unit fires for fewer of the client's images; a unit that one image alone moves
gives that image away as its weight update over its bias update.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.federation.active import ActiveSettings, ActiveThreatModel, Downlinks, Exchange, Readout
from fedattack.target import State


@dataclass(frozen=True, kw_only=True)
class QuietSettings(ActiveSettings):
    """shift: how far every first-layer bias is lowered."""

    shift: float = 1.0


class QuietUnits(ActiveThreatModel):
    """Lowers the first layer's biases so that its units fire rarely, then reads unit ratios."""

    name = "quiet-units"
    paper = "an example plugin"
    acts = "lowers every bias of the first dense layer it sends"
    Settings = QuietSettings

    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        shift = self.settings.shift
        return Downlinks(honest.target, {k: {**p, "fc1.bias": p["fc1.bias"] - shift}
                                         for k, p in honest.payloads.items()})

    def read(self, seen: Exchange) -> Readout:
        sent, got = seen.sent[seen.victim], seen.received[seen.victim]
        d_weight, d_bias = got["fc1.weight"] - sent["fc1.weight"], got["fc1.bias"] - sent["fc1.bias"]
        moved = d_bias.abs() > 1e-9
        z = (d_weight[moved] / d_bias[moved, None]).view(-1, *seen.target.ctx.input_shape)
        norm = seen.target.ctx.normalization
        if norm is not None:
            z = z * torch.tensor(norm.std).view(-1, 1, 1) + torch.tensor(norm.mean).view(-1, 1, 1)
        return Readout(z.clamp(0, 1), {"units read": int(moved.sum())})
