"""A module the server puts in front of the method's model: what "the server builds the model" allows.

The client trains whatever model it is sent. `fronted(target, shapes, apply)` is the method with
a module of the server's design between the input and the first layer: its tensors are sent
and trained like every other parameter (the client's own optimiser steps them), and `apply`
maps the normalised input through them before the method's model sees it. It is still that
method (its loss, aggregation, defences and private state), so every method whose model the
server builds can be sent one; a method whose model does not read its input through
`Target.normalized` (CGAU feeds a frozen extractor) is refused in one line.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from fedattack.defences.base import sent_through
from fedattack.registry import UserError
from fedattack.target import State, Target, WireSchema

Apply = Callable[[State, torch.Tensor], torch.Tensor]


class _Fronted:
    """Mixed in before a method's class: its input passes the server's module first."""

    front_names: list[str]
    front_shapes: dict[str, tuple[int, ...]]
    front_apply: Apply
    _front_params: State

    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        self._front_params = {n: params[n] for n in self.front_names}
        rest = {n: t for n, t in params.items() if n not in self._front_params}
        return super().forward(rest, x)  # type: ignore[misc]  # the method's own forward

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        z = super().normalized(x)  # type: ignore[misc]  # the method's normalisation
        return self.front_apply(self._front_params, z)

    def wire_schema(self) -> WireSchema:
        """The method's schema (its defences' dtypes applied) and the front's tensors, which
        the same defences send as they send the method's (secure aggregation's ring elements)."""
        own = super().wire_schema()  # type: ignore[misc]
        added = WireSchema(downlink=self.front_shapes, uplink=self.front_shapes)
        front = sent_through(self.defences, added)  # type: ignore[attr-defined]  # the method's defences
        dtypes = {kind: {**front.dtypes.get(kind, {}), **own.dtypes.get(kind, {})} for kind in ("downlink", "uplink")}
        return WireSchema(downlink={**front.downlink, **own.downlink}, uplink={**front.uplink, **own.uplink},
                          dtypes=dtypes)


def check_frontable(target: Target) -> None:
    """Refuse, in one line, a method whose model would never see a module put in front of it."""
    if not type(target).normalizes_inputs:
        raise UserError(f"{target.name}'s model does not read its input through the method's normalisation, "
                        "so a module in front of it would see nothing; choose trap-weights or another method")


def fronted(target: Target, shapes: dict[str, tuple[int, ...]], apply: Apply) -> Target:
    """`target` with the module `apply` (tensors `shapes`) in front of its model."""
    check_frontable(target)
    cls: Any = type(f"Fronted{type(target).__name__}", (_Fronted, type(target)), {"__module__": __name__})
    out: Any = copy.copy(target)
    out.__class__ = cls
    out.front_names, out.front_shapes, out.front_apply = list(shapes), dict(shapes), apply
    out.param_names = [*shapes, *target.param_names]
    return out


def shaped_like(z: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """A per-image scalar (N,) broadcast over the image shape of z (N, C, H, W)."""
    return flat.view(-1, *([1] * (z.dim() - 1)))
