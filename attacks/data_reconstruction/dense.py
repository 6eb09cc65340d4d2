"""The first dense layer of a network and what feeds it: where a CNN's update still reads like
an MLP's (issue #36).

A dense layer whose input is the features f(x) of the layers before it (convolutions, ReLU,
pooling) adds d f^T to its weight and d to its bias at every SGD step, exactly as a dense first
layer does with pixels (`unmix`). Its update over a local run is therefore sum_i a_i f_i^T, one
term per training image, except that the features drift as the convolutions train: f_i is
evaluated at moving weights. With a small local rate the drift is small (Dimitrov et al.'s
setting, lr 0.004, 100 steps: the true features sit 2-7% off the update's top-N row space), so
the row space is nearly the span of the N images' features, and post-ReLU features are
non-negative with many exact zeros: the cone reading of `unmix` finds them approximately
(`through`). This module only finds the layer and evaluates its input.

The layer is the first `nn.Linear` (or WAFFLe's factorised linear, whose `W_a` multiplies
[f, 1]) whose weight the update carries; `features(params, x)` runs the model up to it and
stops there (a forward pre-hook), so the dense layers after it cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from fedattack.attacks.data_reconstruction.objectives import State
from fedattack.attacks.data_reconstruction.unmix import FirstLayer
from fedattack.target import Target

Features = Callable[[State, torch.Tensor], torch.Tensor]


class _Reached(Exception):
    """Raised by the pre-hook: the dense layer's input is in hand, the rest is not needed."""


@dataclass(frozen=True)
class DenseLayer:
    """The first dense layer on the wire: its module, weight key, input width, and update."""

    module: str
    weight_key: str
    inputs: int
    update: FirstLayer
    on_pixels: bool  # the layer sees the pixels (an MLP): `unmix` reads images directly

    def features(self, target: Target) -> Features:
        """f(params, x): the (N, inputs) input of this layer, differentiable in x and params."""
        module = target.model.get_submodule(self.module)
        seen: list[torch.Tensor] = []

        def hook(_: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            seen.append(args[0])
            raise _Reached

        def run(params: State, x: torch.Tensor) -> torch.Tensor:
            seen.clear()
            handle = module.register_forward_pre_hook(hook)
            try:
                target.forward(params, x)
            except _Reached:
                pass
            finally:
                handle.remove()
            return seen[0].flatten(1)

        return run


def dense_layer(target: Target, start: State, after: State, shape: tuple[int, ...]) -> DenseLayer | None:
    """The first dense layer whose weight the update carries (module order), or None."""
    for name, module in target.model.named_modules():
        if isinstance(module, nn.Linear):
            key, bias_key, width = f"{name}.weight", f"{name}.bias", module.in_features
        elif factorised_dense(module):
            key, bias_key, width = f"{name}.W_a", "", module.W_a.shape[0] - 1
        else:
            continue
        if key not in after or key not in start:
            continue
        return DenseLayer(name, key, width, layer_update(start, after, key, bias_key, width),
                          on_pixels=width == math.prod(shape) and _first_with_parameters(target, name))
    return None


def factorised_dense(module: nn.Module) -> bool:
    """A factorised dense layer (WAFFLe's), told by what it holds, since attacks import no
    method: a `W_a` that multiplies [x, 1], and no convolution's padding."""
    return isinstance(getattr(module, "W_a", None), torch.Tensor) and not hasattr(module, "padding")


def layer_update(start: State, after: State, key: str, bias_key: str, width: int) -> FirstLayer:
    """(U, width) weight update and (U,) bias update: a linear layer's own, or the rows of a
    factorised `W_a` ((width + 1) x F, multiplying [f, 1]: its last row is the bias's)."""
    delta = (after[key] - start[key]).detach().double().cpu()
    if delta.shape[1] == width:
        bias = None
        if bias_key in after and bias_key in start:
            bias = (after[bias_key] - start[bias_key]).detach().double().cpu()
        return FirstLayer(delta, bias)
    return FirstLayer(delta[:width].T, delta[width])


def _first_with_parameters(target: Target, name: str) -> bool:
    """Whether no module with parameters comes before `name` (nothing transforms the pixels)."""
    for other, module in target.model.named_modules():
        if other == name:
            return True
        if other and any(True for _ in module.parameters(recurse=False)):
            return False
    return True
