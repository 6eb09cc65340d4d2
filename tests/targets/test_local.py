"""Local: nothing crosses the wire, and every client keeps a model of its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from fedattack.federation.rundir import Federation


def test_nothing_on_the_wire_and_models_differ(target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run("local"))
    assert len(fed.transcript().load()) == 0
    assert fed.manifest["recording"]["bytes_on_wire"] == 0
    models = [fed.private_state(k) for k in range(fed.num_clients)]
    assert not torch.equal(models[0]["fc1.weight"], models[1]["fc1.weight"])
    target = fed.target()
    assert torch.equal(target.deployed({}, models[2])["fc2.bias"], models[2]["fc2.bias"])
