"""Same seed, same federation, bit for bit; a different seed, a different one."""

from __future__ import annotations

from pathlib import Path

import torch

from fedattack.federation.rundir import Federation
from fedattack.federation.train import train_federation
from tests.conftest import tiny_spec


def _tensors(run: Path) -> dict[str, torch.Tensor]:
    fed = Federation(run)
    out = {f"server/{k}": v for k, v in fed.server_state().items()}
    for m in fed.transcript().load():
        for k, v in m.payload.items():
            out[f"{m.round}/{m.kind}/{m.client}/{k}"] = v
    return out


def test_same_seed_gives_identical_saved_tensors(fedavg_run: Path, tmp_path: Path) -> None:
    again = train_federation(tiny_spec(rounds=4), tmp_path / "again", progress=False)
    a, b = _tensors(fedavg_run), _tensors(again)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert Federation(fedavg_run).metrics() == Federation(again).metrics()


def test_different_seed_gives_a_different_federation(fedavg_run: Path, tmp_path: Path) -> None:
    other = train_federation(tiny_spec(rounds=4, seed=1), tmp_path / "other", progress=False)
    a, b = _tensors(fedavg_run), _tensors(other)
    assert not torch.equal(a["server/fc1.weight"], b["server/fc1.weight"])
