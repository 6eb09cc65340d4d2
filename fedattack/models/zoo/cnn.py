"""Convolutional networks of the seed papers: the WAFFLe FMNIST and CIFAR-10 CNNs, LeNet-5 and
Dimitrov et al.'s CNN; each declares what it computes (`ConvNet.layout`) for the step kernels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS

POOL_SIZE = 2  # every ConvNet pools 2x2, wherever the map is at least that large (`pools`)
POOLS: dict[str, Callable[..., torch.Tensor]] = {"max": nn.functional.max_pool2d, "avg": nn.functional.avg_pool2d}


@dataclass(frozen=True)
class Conv:
    """One convolution of a `ConvNet` as its forward computes it: every fact a step kernel
    would have to reproduce (`nn.Conv2d`'s geometry and bias)."""

    name: str
    padding: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    padding_mode: str = "zeros"
    bias: bool = True


@dataclass(frozen=True)
class ConvLayout:
    """What a `ConvNet` computes, declared whole so a kernel is chosen only where it computes
    every part of it (`fedattack.kernels.conv.computes`): each convolution, then `activation`,
    then `pool`-pooling (2x2, where `pools`); no normalisation (`norm`); then the fully connected
    layers (name, whether it has a bias) with `activation` between them and none after the last."""

    convs: tuple[Conv, ...]
    fcs: tuple[tuple[str, bool], ...]
    pool: str  # "max" or "avg"
    activation: str = "relu"
    norm: str | None = None
    pool_size: int = POOL_SIZE

    @property
    def convs_and_fcs(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.convs) + tuple(name for name, _ in self.fcs)


def pools(h: torch.Tensor) -> bool:
    """Whether a block pools this feature map: only where both sides hold a whole window (the
    rule one definition fits 8x8, 28x28 and 32x32 inputs by; the conv kernel applies it too)."""
    return min(h.shape[-2:]) >= POOL_SIZE


class ConvNet(nn.Module):
    """Conv (ReLU, 2x2 pooling) blocks, then fully connected layers.

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
        if pool not in POOLS:
            raise ValueError(f"pool={pool!r}: use one of {', '.join(POOLS)}")
        self.pool_kind = pool
        self.pool = POOLS[pool]
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
        """What this network computes (see `ConvLayout`), where its layers are the plain
        `nn.Conv2d` and `nn.Linear` whose facts the layout states and `forward` is this class's;
        None where a method replaced some layer (WAFFLe's factorised ones) or a subclass its own
        forward, whose computation no declaration here describes."""
        if type(self).forward is not ConvNet.forward or type(self).features is not ConvNet.features:
            return None
        convs = [getattr(self, f"conv{i}") for i in range(1, self.num_convs + 1)]
        fcs = [getattr(self, f"fc{i}") for i in range(1, self.num_fcs + 1)]
        if any(type(c) is not nn.Conv2d for c in convs) or any(type(f) is not nn.Linear for f in fcs):
            return None
        return ConvLayout(tuple(_declared(f"conv{i}", c) for i, c in enumerate(convs, start=1)),
                          tuple((f"fc{i}", f.bias is not None) for i, f in enumerate(fcs, start=1)),
                          pool=self.pool_kind)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, self.num_convs + 1):
            x = getattr(self, f"conv{i}")(x).relu()
            if pools(x):
                x = self.pool(x, POOL_SIZE)
        return x.flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        for i in range(1, self.num_fcs + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.num_fcs:
                x = x.relu()
        return x


def _declared(name: str, conv: nn.Conv2d) -> Conv:
    return Conv(name, _pair(conv.padding), _pair(conv.stride), _pair(conv.dilation), conv.groups,
                conv.padding_mode, conv.bias is not None)


def _pair(value: object) -> tuple[int, int]:
    """A conv's (height, width) setting; (-1, -1) for a padding given by name ("same", "valid")."""
    if isinstance(value, tuple) and len(value) == 2:
        return int(value[0]), int(value[1])
    return (-1, -1)


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
