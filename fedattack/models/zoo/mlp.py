"""Multilayer perceptrons: the WAFFLe paper's MNIST MLP (784-200-10) and a small one for digits."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS


@dataclass(frozen=True)
class DenseLayout:
    """What an `MLP` computes, declared whole for the step kernels (`fedattack.kernels.dense`):
    the input flattened, then the layers (name, whether it has a bias) in order, `activation`
    between them and none after the last; no normalisation (`norm`)."""

    layers: tuple[tuple[str, bool], ...]
    activation: str = "relu"
    norm: str | None = None


class MLP(nn.Module):
    """Flatten, then hidden layers with ReLU, then the output layer (`fc1`, `fc2`, ...)."""

    def __init__(self, d_in: int, hidden: list[int], num_classes: int, layers: Layers) -> None:
        super().__init__()
        sizes = [d_in, *hidden, num_classes]
        for i in range(len(sizes) - 1):
            self.add_module(f"fc{i + 1}", layers.linear(f"fc{i + 1}", sizes[i], sizes[i + 1]))
        self.depth: int = len(sizes) - 1

    def chain(self) -> tuple[str, ...]:
        """The layers in the order `forward` applies them (ReLU between, none after the last)."""
        return tuple(f"fc{i}" for i in range(1, self.depth + 1))

    def layout(self) -> DenseLayout | None:
        """What this network computes (see `DenseLayout`), where every layer is a plain
        `nn.Linear` and `forward` is this class's; None where a method replaced some layer or a
        subclass the forward, which no declaration here describes."""
        chain = self.chain()
        if type(self).forward is not MLP.forward or any(type(getattr(self, n)) is not nn.Linear for n in chain):
            return None
        return DenseLayout(tuple((n, getattr(self, n).bias is not None) for n in chain))

    def dense_layers(self) -> tuple[str, ...] | None:
        """The chain, where the layout is plain `nn.Linear` layers with biases and ReLU between
        (what the `dense` kernel and a contributor's MLP kernel compute); None otherwise."""
        layout = self.layout()
        if layout is None or layout.activation != "relu" or layout.norm is not None:
            return None
        return self.chain() if all(bias for _, bias in layout.layers) else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for i in range(1, self.depth + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.depth:
                x = x.relu()
        return x


@MODELS.register("mnist-mlp")
def mnist_mlp(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """WAFFLe appendix C: one hidden layer of 200 ReLU units (WAFFLe factorises `fc1`, F=120)."""
    return MLP(math.prod(input_shape), [200], num_classes, layers)


@MODELS.register("digits-mlp")
def digits_mlp(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """A small MLP (64 hidden units) sized for scikit-learn's 8x8 digits."""
    return MLP(math.prod(input_shape), [64], num_classes, layers)
