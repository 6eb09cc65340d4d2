"""A module the server puts in front of the method's model: what "the server builds the model" allows.

The client trains whatever model it is sent. `fronted(target, shapes, apply)` is the method with
a module of the server's design between the input and the first layer: its tensors are more of
the method's parameters (`param_names`, `param_shapes`), so the method sends, trains, encodes and
decodes them as it does every other parameter (SCAFFOLD's control variate and dy/dc, q-FFL's
scaled delta, FedPer's base), and `apply` maps the normalised input through them before the
method's model sees it. It is still that method (its loss, aggregation, defences and private
state). What the server never had for the module, it sends as a parameter starts
(`with_module`: SCAFFOLD's c = 0, the paper's initialisation). A method whose model does not read
its input through `Target.normalized` (CGAU feeds a frozen extractor), or that puts nothing on
the wire, is refused in one line.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from fedattack.registry import UserError
from fedattack.target import State, Target
from fedattack.wire import Message, Payload

Apply = Callable[[State, torch.Tensor], torch.Tensor]


class _Fronted:
    """Mixed in before a method's class: its input passes the server's module first."""

    front_names: list[str]
    front_shapes: dict[str, tuple[int, ...]]
    front_apply: Apply
    front_state: State  # the server's side of the module, as it sent it (`with_module`)
    _front_params: State

    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        self._front_params = {n: params[n] for n in self.front_names}
        rest = {n: t for n, t in params.items() if n not in self._front_params}
        return super().forward(rest, x)  # type: ignore[misc]  # the method's own forward

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        z = super().normalized(x)  # type: ignore[misc]  # the method's normalisation
        return self.front_apply(self._front_params, z)

    def param_shapes(self, names: list[str] | None = None) -> dict[str, tuple[int, ...]]:
        """The module's tensors first, then the method's: every schema the method derives from
        its parameters (its wire, through its defences) then holds the module too."""
        shapes = {**self.front_shapes, **super().param_shapes()}  # type: ignore[misc]
        return shapes if names is None else {n: shapes[n] for n in names}

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        """The method's aggregate, over a server state that holds the module as it was sent."""
        return super().aggregate({**self.front_state, **server}, uplinks, rnd)  # type: ignore[misc]


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
    out.front_state = {}
    out.param_names = [*shapes, *target.param_names]
    return out


def with_module(model: Target, down: Payload, module: Payload) -> Payload:
    """A client's downlink of the fronted `model`: the method's own `down`, the module, and every
    other tensor the fronted method's downlink declares for the module (its state of a new
    parameter) as zeros, the state such a parameter starts from. What the server thereby holds
    of the module is remembered for the round's aggregate (`front_state`)."""
    schema = model.wire_schema()
    sent = {**module, **down}
    starts = {n: torch.zeros(s, dtype=schema.dtype("downlink", n)) for n, s in schema.downlink.items()
              if n not in sent}
    front: Any = model
    front.front_state = {**module, **starts}
    return {**starts, **sent}


def shaped_like(z: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """A per-image scalar (N,) broadcast over the image shape of z (N, C, H, W)."""
    return flat.view(-1, *([1] * (z.dim() - 1)))
