"""Model architectures by name, built for a dataset's input shape."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from fedattack.models.layers import Layers
from fedattack.registry import MODELS


def build_model(
    name: str, input_shape: tuple[int, int, int], num_classes: int, layers: Layers | None = None
) -> nn.Module:
    """Build architecture `name`; `layers` lets a method swap in its own layer types."""
    builder = MODELS.get(name)
    return builder(input_shape, num_classes, layers or Layers())


MIXING = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)  # layers whose output mixes a batch's samples


def mixes_samples(model: nn.Module) -> str | None:
    """The first layer of `model` whose output for one sample depends on the others in its batch
    (batch norm on batch statistics), or None. Such a model has no per-sample gradient (DP-SGD
    refuses it) and trains client by client: a stacked step pads short batches, and the padding
    would enter the batch's statistics."""
    return next((f"{name} ({type(m).__name__})" for name, m in model.named_modules() if isinstance(m, MIXING)), None)


def compact(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """The builder of the smallest faithful instance of an architecture (its `compact`
    attribute: the same layers at a width a test suite affords, e.g. ResNet-18 at width 4), or
    the builder itself; what the tests build every registered model with."""
    found = getattr(builder, "compact", None)
    return found if callable(found) else builder


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (what the papers' "# of parameters" counts, biases included)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
