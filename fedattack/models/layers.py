"""Layer factories: how an architecture asks for its layers.

Architectures ask a factory for their layers by name instead of calling `nn.Linear` directly,
so one architecture definition serves both the plain model and a method that replaces some of
its layers (WAFFLe factorises named layers into a dictionary of rank-1 factors:
`targets/waffle/layers.py`), through `Target.layers`.
"""

from __future__ import annotations

from torch import nn


class Layers:
    """The plain factory: ordinary linear and convolution layers."""

    def linear(self, name: str, d_in: int, d_out: int) -> nn.Module:
        return nn.Linear(d_in, d_out)

    def conv(self, name: str, c_in: int, c_out: int, kernel: int, padding: int) -> nn.Module:
        return nn.Conv2d(c_in, c_out, kernel, padding=padding)
