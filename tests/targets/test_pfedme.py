"""pFedMe: the personalised model stays home and is what a trained client deploys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from fedattack.federation.rundir import Federation


def test_personal_model_is_private_and_deployed(target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run("pfedme"))
    target, server = fed.target(), fed.server_state()
    ups = fed.transcript().load(kind="uplink")
    last = {m.client: m for m in ups}
    assert last
    for k, m in last.items():
        theta = fed.private_state(k)
        assert set(theta) == set(m.payload) == set(target.param_names)
        assert not torch.equal(theta["fc1.weight"], m.payload["fc1.weight"])
        assert torch.equal(target.deployed(server, theta)["fc2.weight"], theta["fc2.weight"])
    never = [k for k in range(fed.num_clients) if k not in last]
    assert all(fed.private_state(k) == {} for k in never)
    if never:
        assert torch.equal(target.deployed(server, {})["fc1.weight"], server["fc1.weight"])
