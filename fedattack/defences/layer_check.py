"""A client that knows what an honestly trained layer looks like: refuse a downlink whose layers do not.

`downlink-check` compares a downlink with the client's last accepted one, so it sees nothing in a
client's first round, and in cross-device federations most rounds are a client's first (trap
weights pass it there, docs/active-server.md). This check needs no memory: it judges each model
weight (`Target.downlink_weights`, two or more dimensions; and any tensor the method does not
declare, judged as a layer) by what honest initialisation and
training leave in a layer, and refuses a downlink where
  - a row is all zeros (units that can never fire for anyone: the dead blocks of a server that
    gives each client its own units, LOKI-style; a model of zeros, Pasquini et al. 2022). Honest
    initialisation draws every row at random and SGD moves every row a unit's gradient reaches;
  - two rows point the same way (|cosine| above `max_cosine`): a layer of units that all measure
    one direction (the imprint's bins, Fowl et al. 2022). Random rows of a few dozen inputs or
    more are far from parallel, and training does not pull them together in a few hundred rounds;
  - the first layer's units would fire rarely: the median over units of b / ||w|| (the bias in
    units of the row's norm, which on inputs of unit variance per coordinate, what the model's
    own normalisation makes of them, is the threshold in standard deviations) below
    `-max_threshold`. Trap weights (Boenisch et al. 2023) set each unit's bias at the (1 - p)
    quantile of its pre-activation, about -2.3 deviations for p = 1%; honest initialisation
    keeps |b| / ||w|| below 0.1 (PyTorch's default: |b| <= 1/sqrt(fan_in), ||w|| about 1/sqrt(3)).
What it cannot see: a server that draws its trap directions where the data barely varies (so a
small bias is rare on the data), rows slightly perturbed apart, or any attack that leaves each
layer's statistics honest (model inconsistency's victim gets the honest model). The thresholds
were set from what initialisation gives, before any attack was measured (docs/active-server.md
lists the honest margins measured after). Its refusal is `downlink-check`'s: a zero update, and
the manifest counts each reason; a method whose own first downlink it would refuse is refused in
one line.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.registry import UserError
from fedattack.wire import Payload

ROWS_COMPARED = 2048  # rows of one weight compared pairwise at most (evenly spaced beyond)


@dataclass(frozen=True, kw_only=True)
class LayerSettings:
    """max_cosine: the largest |cosine| two rows of one weight may have. max_threshold: the largest
    median -b/||w|| of the first layer's units (their firing threshold in deviations of the input)."""

    max_cosine: float = 0.99
    max_threshold: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.max_cosine < 1.0:
            raise UserError(f"layer-check max_cosine={self.max_cosine} must be in (0, 1)")
        if not self.max_threshold > 0.0:
            raise UserError(f"layer-check max_threshold={self.max_threshold} must be positive")


class LayerCheck(DownlinkCheck):
    """Refuses a downlink whose layers hold dead rows, parallel rows, or rarely firing first units."""

    name = "layer-check"
    Settings = LayerSettings  # type: ignore[assignment]  # its own settings, not downlink-check's

    @staticmethod
    def kind(why: str) -> str:
        """Counted without its numbers (the parenthesis) or the tensor's name."""
        return DownlinkCheck.kind(why).split(" (")[0]

    def suspicious(self, down: Payload, last: Payload | None) -> str | None:
        """Why this downlink is refused (None: accepted); `last` is not needed."""
        first = True
        for name, t in down.items():
            if (name not in self.weights and name in self.schema) or t.dim() < 2 or not t.is_floating_point():
                continue  # protocol state; a tensor the method does not declare is judged as a layer
            rows = t.detach().flatten(1).double()
            why = row_statistics(name, rows, self.settings.max_cosine)
            if why is None and first:
                why = rare_firing(name, rows, down.get(bias_of(name)), self.settings.max_threshold)
            if why is not None:
                return why
            first = False
        return None


def row_statistics(name: str, rows: torch.Tensor, max_cosine: float) -> str | None:
    """Dead rows, or two rows nearly parallel."""
    norms = rows.norm(dim=1)
    dead = int((norms == 0).sum())
    if dead:
        return f"{name} has rows all zeros ({dead} of {len(rows)})"
    if len(rows) < 2 or rows.shape[1] < 2:
        return None
    if len(rows) > ROWS_COMPARED:
        rows = rows[torch.linspace(0, len(rows) - 1, ROWS_COMPARED).long()]
    unit = rows / rows.norm(dim=1, keepdim=True)
    cos = (unit @ unit.T).abs().fill_diagonal_(0.0)
    worst = float(cos.max())
    if worst > max_cosine:
        pairs = int((cos > max_cosine).sum()) // 2
        return f"{name} has parallel rows ({pairs} pairs, |cosine| up to {worst:.3f})"
    return None


def rare_firing(name: str, rows: torch.Tensor, bias: torch.Tensor | None, max_threshold: float) -> str | None:
    """The first layer's units whose bias puts their threshold far out on unit-variance inputs."""
    if bias is None or bias.dim() != 1 or len(bias) != len(rows):
        return None
    threshold = float((-bias.double() / rows.norm(dim=1)).median())
    if threshold > max_threshold:
        return f"{name} has units that fire rarely (median bias {threshold:.2f} row norms below zero)"
    return None


def bias_of(weight: str) -> str:
    """The bias beside a weight, by PyTorch's naming."""
    return weight[:-len("weight")] + "bias" if weight.endswith("weight") else weight + ".bias"
