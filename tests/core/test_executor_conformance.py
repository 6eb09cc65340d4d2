"""Every fast path against the reference, for everything registered (issue #43).

Every registered model x every registered method x every registered executor trains a small
federation, and the sequential executor (the reference) trains the same one: the servers, the
clients' private states and every recorded message must agree within the batched executors'
float32 tolerance (exactly, where the method cannot batch and so runs the reference itself). A
defence that changes the local step (`Defence.trains_locally`) is held the same way around every
method on every model. Nothing here is a list of names: a model, method, executor, kernel or
defence registered later is held to the reference by this file without an edit.

The federations are tiny, shaped for each model: three clients of 13, 22 and 30 samples (two,
three and four steps of 8, each with a short last batch) on scikit-learn's digits, two rounds;
a model that cannot take 8x8 greyscale images gets the digits upsampled to 3x32x32.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.data.types import Dataset
from fedattack.defences.base import DEFENCES
from fedattack.federation.executors import EXECUTORS, make_executor
from fedattack.federation.loop import FederationState, client_data
from fedattack.federation.train import build_target
from fedattack.models import build_model
from fedattack.models.layers import Layers
from fedattack.models.zoo.cnn import ConvNet
from fedattack.registry import MODELS, TARGETS, UserError
from fedattack.target import LocalData, Recipe, State, Target
from fedattack.wire import Message
from tests.conftest import run_rounds, tiny_spec

REFERENCE = "sequential"
ATOL, RTOL = 1e-5, 1e-4  # the batched executors' tolerance (float32, two rounds)
SIZES = (13, 22, 30)
SPEC = tiny_spec(num_clients=3, fraction=1.0, rounds=2, recipe=Recipe(epochs=1, batch_size=8, lr=0.05))
SHAPES = ((1, 8, 8), (3, 32, 32))  # the digits as they are, else upsampled to colour 32x32


def step_defences() -> list[str]:
    """The registered defences that change the local step itself."""
    return [n for n in DEFENCES.names() if DEFENCES.get(n).trains_locally]


def cases() -> list[tuple[str, str, str]]:
    """(model, method, defence or "") for every registered combination the test holds."""
    plain = [(model, method, "") for model in MODELS.names() for method in TARGETS.names()]
    defended = [(model, method, d) for d in step_defences() for model in MODELS.names() for method in TARGETS.names()]
    return plain + defended


def fast_executors() -> list[str]:
    return [n for n in EXECUTORS.names() if n != REFERENCE]


@cache
def dataset_for(model: str) -> Dataset:
    """The digits in the first shape the model can be built for."""
    digits = load_dataset("digits")
    for shape in SHAPES:
        try:
            build_model(model, shape, digits.num_classes)
        except (UserError, RuntimeError, ValueError):
            continue
        return digits if shape == digits.input_shape else _reshaped(digits, shape)
    raise AssertionError(f"model {model} builds for none of {SHAPES}; give the test an input it takes")


def _reshaped(data: Dataset, shape: tuple[int, int, int]) -> Dataset:
    def resize(x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=shape[1:], mode="bilinear", align_corners=False).expand(-1, shape[0], -1, -1) \
            .contiguous()
    return dataclasses.replace(data, x_train=resize(data.x_train), x_test=resize(data.x_test))


def federate(model: str, method: str, defence: str,
             executor: str) -> tuple[Target, FederationState, list[Message]]:
    """Two rounds of the tiny federation of `model` x `method` (x `defence`) under `executor`."""
    dataset = dataset_for(model)
    defences = ({"name": defence, "settings": {}},) if defence else ()
    spec = dataclasses.replace(SPEC, model=model, method=method, executor=executor, defences=defences)
    partition = make_partition(spec.partition, dataset.y_train.numpy(), spec.num_clients, spec.seed,
                               spec.dataset, **spec.partition_options)
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    for d, n in zip(datas, SIZES):
        d.x_train, d.y_train = d.x_train[:n], d.y_train[:n]
    _, state, messages = run_rounds(spec, target, datas, make_executor(executor))
    return target, state, messages


def assert_close(a: State, b: State, exact: bool, where: str) -> None:
    assert a.keys() == b.keys(), where
    for k in a:
        if exact:
            assert torch.equal(a[k], b[k]), f"{where}: {k} differs"
        else:
            torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=RTOL, msg=lambda m, k=k: f"{where}: {k}: {m}")


def test_every_model_is_held_to_the_reference() -> None:
    """Not vacuous: each registered model is trained by at least one method (methods may
    refuse a model, in one line, which skips that pair only)."""
    refused = {model: 0 for model in MODELS.names()}
    for model, method, defence in cases():
        if defence:
            continue
        try:
            build_target(dataclasses.replace(SPEC, model=model, method=method), dataset_for(model), 3)
        except UserError:
            refused[model] += 1
    assert all(n < len(TARGETS.names()) for n in refused.values()), refused


@pytest.mark.parametrize("model, method, defence", cases())
def test_fast_executors_train_the_reference_federation(model: str, method: str, defence: str) -> None:
    try:
        target, ref, ref_msgs = federate(model, method, defence, REFERENCE)
    except UserError as exc:  # this method (or defence) does not compose with this model
        pytest.skip(f"{method} x {model}{' x ' + defence if defence else ''}: {exc}")
    exact = not target.batchable  # a method that cannot batch runs through the reference itself
    for executor in fast_executors():
        _, state, msgs = federate(model, method, defence, executor)
        where = f"{executor} vs {REFERENCE}, {method} on {model}{' with ' + defence if defence else ''}"
        assert [(m.round, m.sender, m.receiver, m.kind, m.samples) for m in msgs] == \
            [(m.round, m.sender, m.receiver, m.kind, m.samples) for m in ref_msgs], where
        for m, n in zip(msgs, ref_msgs):
            assert_close(m.payload, n.payload, exact, f"{where}, round {m.round} {m.kind} of client {m.client}")
        assert_close(state.server, ref.server, exact, f"{where}, server")
        for k, (p, q) in enumerate(zip(state.private, ref.private)):
            assert_close(p, q, exact, f"{where}, client {k}'s private state")


class _StridedLayers(Layers):
    """Convolutions of stride 2: a layout fact the `conv` kernel does not compute."""

    def conv(self, name: str, c_in: int, c_out: int, kernel: int, padding: int) -> nn.Module:
        return nn.Conv2d(c_in, c_out, kernel, padding=padding, stride=2)


class _TanhNet(ConvNet):
    """A ConvNet whose blocks are tanh, not ReLU: its own forward, so it declares no layout."""

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, self.num_convs + 1):
            x = getattr(self, f"conv{i}")(x).tanh()
        return x.flatten(1)


UNKERNELLED = {
    "test-strided-cnn": lambda shape, classes, layers: ConvNet(shape, [(4, 3, 1), (4, 3, 1)], [8], classes,
                                                               _StridedLayers()),
    "test-tanh-cnn": lambda shape, classes, layers: _TanhNet(shape, [(4, 3, 1)], [8], classes, layers),
}


@pytest.mark.parametrize("name", UNKERNELLED)
def test_a_model_no_kernel_computes_takes_the_generic_path(name: str, isolated_registries: None) -> None:
    """A model registered later whose layout no kernel computes (a stride, its own forward) is
    trained by the generic `vmap(grad(local_loss))` path, and that path is the reference's."""
    MODELS.add(name, UNKERNELLED[name])
    data = dataset_for(name)
    target = build_target(dataclasses.replace(SPEC, model=name), data, 3)
    local = LocalData(data.x_train[:8], data.y_train[:8], data.x_test[:0], data.y_test[:0])
    start = target.init_server(torch.Generator().manual_seed(0))
    assert target.step_kernel(target.start_local(start, {}, local)) is None
    test_fast_executors_train_the_reference_federation(name, "fedavg", "")
