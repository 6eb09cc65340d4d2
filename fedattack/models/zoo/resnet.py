"""ResNet-18, the CIFAR variant (He et al. 2016, "Deep Residual Learning for Image Recognition";
the 3x3 stem without max-pooling that CIFAR-10 work uses, breaching's `ResNet18` among them).

A 3x3 convolution of `width` channels, batch norm and ReLU, then four stages of two basic blocks
(two 3x3 convolutions, each followed by batch norm, the second's output added to the block's
input before the last ReLU) of width, 2x, 4x and 8x channels, the last three starting with
stride 2 (a 1x1 strided convolution and batch norm on the shortcut where the shape changes),
global average pooling, and one linear layer `fc` to the classes. Convolutions have no bias
(batch norm's shift replaces it). At width 64 on 32x32 colour images: 11,173,962 parameters.

Batch norm runs as clients run it in training, on the statistics of the batch it is given, and
it keeps no running statistics (`track_running_stats=False`): the decision this zoo takes, and
the reason nothing but parameters crosses the wire. FedAvg implementations that keep running
means and variances usually average them like weights (Flower's and FedML's state dicts do),
so their server holds statistics no single client computed; here every party, client or
server or attacker, normalises with the statistics of the batch it computes on, and the wire
schema (the method's parameters) is the whole model. The price is that a prediction depends on
the batch it is made in (the layer mixes samples, `fedattack.models.mixes_samples`), which is
why such a model trains client by client (a stacked step pads short batches, whose padding
would enter the statistics) and why DP-SGD refuses it.

`width` sets the stem's channels (the paper's 64); `compact` is the same network at width 4,
what the test suite builds for every model that declares one.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS

STAGES = (1, 2, 4, 8)  # each stage's channels, in stem widths
BLOCKS = 2  # basic blocks per stage (ResNet-18: 2 x 4 stages x 2 convolutions + stem + fc)
COMPACT_WIDTH = 4


def norm(channels: int) -> nn.BatchNorm2d:
    """Batch norm on the batch's own statistics, with no running statistics (see the module docstring)."""
    return nn.BatchNorm2d(channels, track_running_stats=False)


class Subsample(nn.Module):
    """Every `stride`-th row and column: a strided 1x1 convolution's sampling, done before the
    convolution (the same numbers; torch 2.14's CPU backward of a 1x1 stride-2 convolution
    corrupted the heap on 4-channel 8x8 maps here)."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :, ::self.stride, ::self.stride]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; the input (or its 1x1 projection) added back."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = norm(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = norm(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(Subsample(stride), nn.Conv2d(c_in, c_out, 1, bias=False), norm(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn1(self.conv1(x)).relu()
        return (self.bn2(self.conv2(out)) + self.shortcut(x)).relu()


class ResNet(nn.Module):
    """Stem, four stages of `BLOCKS` basic blocks (`layer1`..`layer4`), pooling, `fc`."""

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, layers: Layers, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(input_shape[0], width, 3, padding=1, bias=False)
        self.bn1 = norm(width)
        c_in = width
        for i, scale in enumerate(STAGES, start=1):
            blocks = [BasicBlock(c_in if b == 0 else width * scale, width * scale, 2 if b == 0 and i > 1 else 1)
                      for b in range(BLOCKS)]
            self.add_module(f"layer{i}", nn.Sequential(*blocks))
            c_in = width * scale
        self.fc = layers.linear("fc", c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn1(self.conv1(x)).relu()
        for i in range(1, len(STAGES) + 1):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@MODELS.register("resnet18")
def resnet18(input_shape: tuple[int, int, int], num_classes: int, layers: Layers, width: int = 64) -> nn.Module:
    """ResNet-18 for CIFAR-sized inputs (3x3 stem, no max-pooling), batch norm in train mode."""
    return ResNet(input_shape, num_classes, layers, width)


resnet18.compact = partial(resnet18, width=COMPACT_WIDTH)  # the suite's build (`fedattack.models.compact`)
