"""How servers combine what clients send (the weighted means the methods' `aggregate` share)
and how an update sent under its own names is applied to the model it was trained from.

Sums run in the order given (the order the sequential reference adds them), so every executor
gives the server the same floats.
"""

from __future__ import annotations

import torch

from fedattack.contract import State
from fedattack.wire import Message, Payload


def weighted_mean(uplinks: list[Message], weights: list[float] | None = None) -> Payload:
    """The weighted average of each named tensor (FedAvg's: weights are the samples n_k)."""
    weights = [float(samples_of(m)) for m in uplinks] if weights is None else weights
    total = float(sum(weights))
    return {n: weighted_sum([m.payload[n] for m in uplinks], [w / total for w in weights])
            for n in uplinks[0].payload}


def weighted_sum(tensors: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
    """sum_i w_i t_i, in the order given (the order the sequential reference adds them)."""
    out = weights[0] * tensors[0]
    for w, t in zip(weights[1:], tensors[1:]):
        out = out + w * t
    return out


def samples_of(message: Message) -> int:
    """The sample count a received uplink reports (every uplink the round loop delivers has one)."""
    if message.samples is None:
        raise ValueError(f"the uplink of client {message.sender} reports no sample count")
    return message.samples


def applied_update(down: Payload | None, up: Payload, names: list[str], prefix: str,
                   scale: float = 1.0) -> State | None:
    """down + scale * up[prefix + name]: a client model sent as an update of the downlink."""
    if down is None or not all(prefix + n in up and n in down for n in names):
        return None
    return {n: down[n] + scale * up[prefix + n] for n in names}
