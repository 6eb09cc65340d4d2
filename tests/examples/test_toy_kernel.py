"""Issue #35: a contributor's fast kernel is one file (`toy_kernel.py`, beside its method).

Loaded as a plugin, the method hands the batched executor its kernel through `step_kernel`,
the executor trains with it (and with no other path), and the federation equals the sequential
executor's within the batched tolerance: with no edit anywhere else.
"""

from __future__ import annotations

import sys

import pytest
import torch

from fedattack.federation.executors import make_executor
from fedattack.registry import TARGETS
from fedattack.target import Recipe
from tests.conftest import build
from tests.examples.one_file import load_example
from tests.targets.test_waffle_fused import _train
from tests.targets.test_waffle_recipe import uneven_clients


@pytest.fixture(autouse=True)
def _loaded(isolated_registries: None) -> None:
    load_example("toy_kernel.py", TARGETS, "decay-avg", "DecayAvg")


def test_the_executor_trains_with_the_contributors_kernel() -> None:
    module = sys.modules["fedattack_plugin_toy_kernel"]
    target = build("decay-avg", {"decay": 0.05}, recipe=Recipe(epochs=2, batch_size=8, lr=0.1))
    problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {}, uneven_clients()[0])
    kernel = target.step_kernel(problem)
    assert kernel is not None and kernel.label == "decay-mlp"
    before = module.DecayKernel.steps
    batched = _train(make_executor("batched"), target)
    assert module.DecayKernel.steps > before  # the executor handed it the stacks
    sequential = _train(make_executor("sequential"), target)
    for a, b in zip(batched, sequential):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4, msg=k)
