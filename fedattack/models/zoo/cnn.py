"""Convolutional networks of the seed papers: the WAFFLe FMNIST and CIFAR-10 CNNs and LeNet-5."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS


@dataclass(frozen=True)
class ConvLayout:
    """A `ConvNet` of plain layers, as the `conv` kernel computes it: the convolutions (name,
    padding) and the fully connected layers, in order."""

    convs: tuple[tuple[str, int], ...]
    fcs: tuple[str, ...]

    @property
    def convs_and_fcs(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.convs) + self.fcs


class ConvNet(nn.Module):
    """Conv (ReLU, 2x2 max-pool) blocks, then fully connected layers.

    Layers are named `conv1..`, `fc1..` so a method can factorise them by name. The flattened
    size is found by a dry run, so one definition fits 8x8, 28x28 and 32x32 inputs. Pooling is
    2x2 max (the seeds' models) or average (`pool="avg"`, Dimitrov et al.'s).
    """

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        convs: list[tuple[int, int, int]],
        hidden: list[int],
        num_classes: int,
        layers: Layers,
        pool: str = "max",
    ) -> None:
        super().__init__()
        self.pool = nn.functional.max_pool2d if pool == "max" else nn.functional.avg_pool2d
        c_in = input_shape[0]
        self.num_convs = len(convs)
        for i, (c_out, kernel, padding) in enumerate(convs, start=1):
            self.add_module(f"conv{i}", layers.conv(f"conv{i}", c_in, c_out, kernel, padding))
            c_in = c_out
        with torch.no_grad():
            flat = self.features(torch.zeros(1, *input_shape)).shape[1]
        sizes = [flat, *hidden, num_classes]
        self.num_fcs = len(sizes) - 1
        for i in range(self.num_fcs):
            self.add_module(f"fc{i + 1}", layers.linear(f"fc{i + 1}", sizes[i], sizes[i + 1]))

    def layout(self) -> ConvLayout | None:
        """The layers, if each is plain: a stride-1, undilated, ungrouped, zero-padded
        `nn.Conv2d` with a bias and square padding, and `nn.Linear` layers with biases (what the
        `conv` kernel computes, `fedattack.kernels.conv`); None where a method replaced some."""
        convs = [getattr(self, f"conv{i}") for i in range(1, self.num_convs + 1)]
        fcs = [getattr(self, f"fc{i}") for i in range(1, self.num_fcs + 1)]
        if not all(_plain_conv(c) for c in convs) or any(type(f) is not nn.Linear or f.bias is None for f in fcs):
            return None
        return ConvLayout(tuple((f"conv{i}", c.padding[0]) for i, c in enumerate(convs, start=1)),
                          tuple(f"fc{i}" for i in range(1, len(fcs) + 1)))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, self.num_convs + 1):
            x = getattr(self, f"conv{i}")(x).relu()
            if min(x.shape[-2:]) >= 2:
                x = self.pool(x, 2)
        return x.flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        for i in range(1, self.num_fcs + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.num_fcs:
                x = x.relu()
        return x


def _plain_conv(conv: nn.Module) -> bool:
    return (type(conv) is nn.Conv2d and conv.bias is not None and conv.stride == (1, 1)
            and conv.dilation == (1, 1) and conv.groups == 1 and conv.padding_mode == "zeros"
            and isinstance(conv.padding, tuple) and conv.padding[0] == conv.padding[1])


@MODELS.register("fmnist-cnn")
def fmnist_cnn(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """WAFFLe appendix C: two 5x5 convs (16, 32) with pooling, one FC layer to the classes."""
    return ConvNet(input_shape, [(16, 5, 2), (32, 5, 2)], [], num_classes, layers)


@MODELS.register("cifar-cnn")
def cifar_cnn(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """WAFFLe appendix C: two 3x3 convs (16, 16) with pooling, FC 80 and 60, then the classes.

    The paper does not give the padding; unpadded convolutions (54,398 parameters) come closest
    to its stated 61,770, which no padding choice reproduces exactly.
    """
    pad = 1 if input_shape[1] < 16 else 0
    return ConvNet(input_shape, [(16, 3, pad), (16, 3, pad)], [80, 60], num_classes, layers)


@MODELS.register("lenet5")
def lenet5(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """LeNet-5 (LeCun et al. 1998): 5x5 convs 6 and 16, FC 120 and 84 (ReLU, max-pool)."""
    pad1 = 2 if input_shape[1] <= 28 else 0
    pad2 = 2 if input_shape[1] < 16 else 0
    return ConvNet(input_shape, [(6, 5, pad1), (16, 5, pad2)], [120, 84], num_classes, layers)


@MODELS.register("dimitrov-cnn")
def dimitrov_cnn(input_shape: tuple[int, int, int], num_classes: int, layers: Layers) -> nn.Module:
    """The CNN Dimitrov et al. attack FedAvg with ("Data Leakage in Federated Averaging", TMLR
    2022; their code's `cnn`): 3x3 convs 32 and 64 ('same' padding), each ReLU and 2x2 average
    pooling, a dense layer of 100 ReLU units, then the classes (62 on FEMNIST)."""
    return ConvNet(input_shape, [(32, 3, 1), (64, 3, 1)], [100], num_classes, layers, pool="avg")
