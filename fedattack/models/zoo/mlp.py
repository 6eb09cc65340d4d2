"""Multilayer perceptrons: the WAFFLe paper's MNIST MLP (784-200-10) and a small one for digits."""

from __future__ import annotations

import math

import torch
from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS


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

    def dense_layers(self) -> tuple[str, ...] | None:
        """The chain, if every layer in it is a plain `nn.Linear` (what the `dense` kernel
        computes, `fedattack.kernels.dense`); None where a method replaced some of them."""
        chain = self.chain()
        return chain if all(type(getattr(self, name)) is nn.Linear for name in chain) else None

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
