"""ResNet-18 (CIFAR variant) in the zoo: its size at full width, batch norm on the batch's own
statistics with nothing but parameters on the wire, and what that means for training it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fedattack.federation.train import build_target
from fedattack.models import count_parameters, mixes_samples
from fedattack.models.layers import Layers
from fedattack.models.zoo.resnet import resnet18
from fedattack.registry import UserError
from tests.core.test_executor_conformance import SPEC, dataset_for


def test_full_width_has_resnet18s_parameter_count() -> None:
    """11,173,962 on CIFAR-10 shapes: the count the CIFAR ResNet-18 is known by (a wrong stage
    width, block count or shortcut changes it)."""
    assert count_parameters(resnet18((3, 32, 32), 10, Layers())) == 11_173_962


def test_batch_norm_uses_the_batchs_statistics_and_keeps_none() -> None:
    model = resnet18((3, 32, 32), 10, Layers(), width=4)
    assert mixes_samples(model) is not None and not list(model.buffers())
    x = torch.rand(6, 3, 32, 32)
    alone, together = model(x[:3]), model(x)[:3]
    assert not torch.allclose(alone, together)  # a prediction depends on its batch


def test_the_wire_is_the_parameters_and_it_trains_client_by_client() -> None:
    target = build_target(dataclasses.replace(SPEC, model="resnet18"), dataset_for("resnet18"), 3)
    names = {n for n, _ in target.model.named_parameters()}
    assert set(target.wire_schema().uplink) == set(target.param_names) == names
    assert not target.trains_in_stacks  # padding of a short batch would enter the statistics


def test_dp_sgd_refuses_it_in_one_line() -> None:
    spec = dataclasses.replace(SPEC, model="resnet18", defences=({"name": "dp-sgd", "settings": {}},))
    with pytest.raises(UserError, match="mixes the samples"):
        build_target(spec, dataset_for("resnet18"), 3)
