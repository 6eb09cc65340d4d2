"""Real data (slow, needs FEDATTACK_DATA): the attacks run on Fashion-MNIST and CIFAR-10 federations."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.results import AttackResult
from fedattack.target import Recipe
from tests.attacks.conftest import train_tiny
from tests.conftest import data_root

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dataset,model", [("fmnist", "fmnist-cnn"), ("cifar10", "lenet5")])
def test_both_attacks_on_real_data(dataset: str, model: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = data_root()
    if root is None:
        pytest.skip("set FEDATTACK_DATA to the shared datasets folder")
    run = train_tiny(tmp_path / "run", method="waffle-ibp", dataset=dataset, model=model, num_clients=50,
                     rounds=2, fraction=0.1, recipe=Recipe(epochs=1, batch_size=10, lr=0.02))
    spec = EvaluationSpec(threat_models=["eavesdropper", "oracle"], attacks=["membership", "inversion"],
                          reconstruction="all", aux_size=2000,
                          eval_size=2000, max_queries=200, settings={"steps": 50, "shadows": 1, "classifier": "logreg"})
    paths = evaluate_run(run, spec, tmp_path / "out", data_root=str(root), progress=False)
    results = [AttackResult.load(p) for p in paths]
    assert results and all(r.applicable for r in results)
    assert {r.reconstruction for r in results} >= {"factors-inferred", "true"}
