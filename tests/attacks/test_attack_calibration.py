"""Calibration: the attacks measure what they claim to.

A model that never saw the members gives membership AUC near 0.5; a model that memorised them
gives a clearly higher one; an untrained model's inversions are classified near chance while a
trained one's are not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.results import AttackResult
from fedattack.target import Recipe
from tests.attacks.conftest import train_tiny

MIA = {"shadows": 2, "classifier": "logreg"}


def results(paths: list[Path]) -> list[AttackResult]:
    return [r for r in map(AttackResult.load, paths) if r.applicable]


@pytest.fixture(scope="module")
def unseen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FedAvg where only 2 of 10 clients ever train: the others' data is unseen by every model."""
    return train_tiny(tmp_path_factory.mktemp("calib") / "unseen", partition="iid", rounds=1, fraction=0.2,
                      recipe=Recipe(epochs=20, batch_size=10, lr=0.3))


def test_members_nobody_trained_on_give_auc_near_half(unseen_run: Path, tmp_path: Path) -> None:
    seen = set(Federation(unseen_run).transcript().clients())
    unseen = [c for c in range(10) if c not in seen][:4]
    spec = EvaluationSpec(threat_models="oracle", attacks="membership", victims=unseen, aux_size=140,
                          eval_size=0, settings=MIA)
    paths = evaluate_run(unseen_run, spec, tmp_path, progress=False)
    aucs = [r.metrics["auc"] for r in results(paths)]
    assert len(aucs) == 4 and abs(float(np.mean(aucs)) - 0.5) < 0.08


def test_memorised_members_give_a_clearly_higher_auc(overfit_run: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(attacks="membership", victims="random:3", aux_size=140, eval_size=0, settings=MIA)
    paths = evaluate_run(overfit_run, spec, tmp_path, progress=False)
    found = results(paths)
    assert len(found) == 3
    assert np.mean([r.metrics["auc"] for r in found]) > 0.62
    assert np.mean([r.baselines["loss-threshold"]["auc"] for r in found]) > 0.62


def test_an_untrained_models_inversions_are_classified_near_chance(tmp_path: Path,
                                                                   overfit_run: Path) -> None:
    untrained = train_tiny(tmp_path / "untrained", partition="iid", rounds=1, fraction=0.1,
                           recipe=Recipe(epochs=1, batch_size=10, lr=1e-9))
    spec = EvaluationSpec(attacks="inversion", victims=("random:1",),
                          aux_size=0, eval_size=200, settings={"steps": 300})
    cold = results(evaluate_run(untrained, spec, tmp_path / "cold", progress=False))
    warm = results(evaluate_run(overfit_run, spec, tmp_path / "warm", progress=False))
    assert cold[0].metrics["eval_classifier_accuracy"] > 0.8
    assert cold[0].metrics["attack_accuracy_all_classes"] <= 0.3
    assert warm[0].metrics["attack_accuracy_all_classes"] >= 0.6
