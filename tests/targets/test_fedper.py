"""FedPer: the head (last layer) never goes up or down; each client deploys its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from fedattack.federation.rundir import Federation


def test_head_stays_on_the_client(target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run("fedper"))
    msgs = fed.transcript().load()
    assert msgs
    for m in msgs:
        assert set(m.payload) == {"fc1.weight", "fc1.bias"}
    heads = [fed.private_state(k) for k in range(fed.num_clients)]
    assert all(set(h) == {"fc2.weight", "fc2.bias"} for h in heads)
    assert not torch.equal(heads[0]["fc2.weight"], heads[1]["fc2.weight"])
    target, server = fed.target(), fed.server_state()
    assert set(server) == {"fc1.weight", "fc1.bias"}
    deployed = target.deployed(server, heads[3])
    assert torch.equal(deployed["fc2.weight"], heads[3]["fc2.weight"])
    assert torch.equal(deployed["fc1.weight"], server["fc1.weight"])
