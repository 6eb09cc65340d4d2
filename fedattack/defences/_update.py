"""Arithmetic the defences share on a client's update (not a defence: no `name`).

What "the update" is, the wrapped method declares (`Target.uplink_update` and its inverse
`with_uplink_update`; a defence reaches them as `Defence.update_of` and `Defence.with_update`):
by default the uplink relative to the downlink, read from the names (`fedattack.wire.
update_by_names`), and for a method with an encoding of its own (an int8-quantised uplink) its
decoded update, so a clip or noise always acts on what the client changed, never on scales or
codes. The update is all of it together, so a clipping norm bounds everything a client sends
beyond what it received: the L2 sensitivity that client-level DP needs, whatever the method.
The price is that the norm is in each method's own units (Weight Erosion's in gradient units,
q-FFL's scaled by L F^q; see docs/architecture.md).
"""

from __future__ import annotations

import math

import torch

from fedattack.wire import Payload, update_by_names, with_update_by_names

# The default rule under the names it had here (the audit's canaries and tests read it directly).
update_of = update_by_names
with_update = with_update_by_names

def l2_norm(update: Payload) -> float:
    """The L2 norm of all tensors together (in float64, so it is the same however summed)."""
    return math.sqrt(sum(float((t.double() ** 2).sum()) for t in update.values()))


def clipped(update: Payload, max_norm: float) -> Payload:
    """The update scaled down to an L2 norm of at most max_norm (unchanged if already within)."""
    norm = l2_norm(update)
    if norm <= max_norm:
        return dict(update)
    scale = max_norm / norm
    return {n: t * scale for n, t in update.items()}


def summed(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The sum in the order given (so every executor adds the same floats in the same order)."""
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    return total


def gaussian(like: Payload, std: float, gen: torch.Generator) -> Payload:
    """Independent N(0, std^2) noise shaped like `like`, drawn in its (deterministic) name order."""
    return {n: torch.randn(t.shape, generator=gen, dtype=t.dtype) * std for n, t in like.items()}
