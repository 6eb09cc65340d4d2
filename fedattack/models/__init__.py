"""Model architectures by name, built for a dataset's input shape."""

from __future__ import annotations

from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS


def build_model(
    name: str, input_shape: tuple[int, int, int], num_classes: int, layers: Layers | None = None
) -> nn.Module:
    """Build architecture `name`; `layers` lets a method swap in its own layer types."""
    builder = MODELS.get(name)
    return builder(input_shape, num_classes, layers or Layers())


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (what the papers' "# of parameters" counts, biases included)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
