"""Update compression: top-k sparsification and stochastic b-bit quantisation of the update.

The update is the uplink relative to the downlink (`_update`). Top-k keeps the `top_k` fraction
of its entries largest in magnitude, over all tensors together (Aji and Heafield 2017; no error
feedback, which would be client state), and zeroes the rest. Quantisation maps each kept entry
to one of 2^bits levels spread evenly over its tensor's [min, max], rounding up or down at
random with the probability that makes it unbiased (QSGD-style, Alistarh et al. 2017): the
expected quantised update is the update. The recorded uplink is the downlink plus the compressed
update, under the method's own names, so the method decodes it as usual; the bytes a real codec
would save are not simulated. top_k=1 and bits=0 switch a part off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedattack.defences.base import Defence
from fedattack.registry import UserError
from fedattack.target import ClientContext
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class CompressionSettings:
    """top_k: fraction of update entries kept (1 keeps all). bits: quantisation bits (0 = none)."""

    top_k: float = 0.1
    bits: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.top_k <= 1:
            raise UserError(f"compression top_k={self.top_k} must be in (0, 1]")
        if not 0 <= self.bits <= 16:
            raise UserError(f"compression bits={self.bits} must be in 0..16")


class Compression(Defence):
    """Top-k sparsification and/or unbiased stochastic b-bit quantisation of each update."""

    name = "compression"
    Settings = CompressionSettings

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        update = self.update_of(up, down)
        if not update:
            return up
        s = self.settings
        kept = top_k_masks(update, s.top_k) if s.top_k < 1 else None
        if s.bits:
            gen = self.client_generator(ctx)
            update = {n: quantised(t, s.bits, gen, None if kept is None else kept[n])
                      for n, t in update.items()}
        if kept is not None:
            update = {n: torch.where(kept[n], t, torch.zeros_like(t)) for n, t in update.items()}
        return self.with_update(up, down, update)


def top_k_masks(update: Payload, fraction: float) -> dict[str, torch.Tensor]:
    """Where the largest `fraction` of entries by magnitude are, over all tensors together."""
    flat = torch.cat([t.reshape(-1).abs() for t in update.values()])
    k = max(1, math.ceil(fraction * flat.numel()))
    keep = torch.zeros(flat.numel(), dtype=torch.bool)
    keep[torch.topk(flat, k, sorted=False).indices] = True  # same input, same selection
    out, start = {}, 0
    for n, t in update.items():
        out[n] = keep[start:start + t.numel()].reshape(t.shape)
        start += t.numel()
    return out


def quantised(t: torch.Tensor, bits: int, gen: torch.Generator,
              where: torch.Tensor | None = None) -> torch.Tensor:
    """Unbiased stochastic rounding of `t` to 2^bits levels over [min, max] of its kept entries."""
    values = t if where is None else t[where]
    if values.numel() == 0:
        return t
    lo, hi = values.min(), values.max()
    if hi == lo:
        return t
    step = (hi - lo) / (2**bits - 1)
    scaled = (t - lo) / step
    floor = torch.floor(scaled)
    up = torch.rand(t.shape, generator=gen, dtype=t.dtype) < (scaled - floor)
    return lo + (floor + up.to(t.dtype)).clamp(0, 2**bits - 1) * step
