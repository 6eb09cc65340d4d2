"""FedAvg learns on digits: far above chance after a few rounds, and better than at the start."""

from __future__ import annotations

from pathlib import Path

from fedattack.federation.rundir import Federation
from fedattack.federation.train import train_federation
from fedattack.target import Recipe
from tests.conftest import tiny_spec


def test_fedavg_learns_on_digits(tmp_path: Path) -> None:
    spec = tiny_spec(partition="iid", rounds=8, fraction=0.5, recipe=Recipe(epochs=2, batch_size=10, lr=0.1))
    fed = Federation(train_federation(spec, tmp_path / "run", progress=False))
    rounds = fed.metrics()["rounds"]
    first = sum(rounds[0]["accuracy"]) / len(rounds[0]["accuracy"])
    final = fed.manifest["utility"]["mean"]
    assert final > 80.0, final
    assert final > first * 100
