"""Membership metrics on hand-made scores."""

from __future__ import annotations

import numpy as np
import pytest

from fedattack.attacks.membership.metrics import all_metrics, best_threshold, ranking


def test_perfect_and_reversed_scores() -> None:
    truth = np.r_[np.ones(100, int), np.zeros(100, int)]
    scores = np.linspace(1.0, 0.0, 200)
    perfect, curves = ranking(truth, scores)
    assert perfect["auc"] == 1.0 and perfect["tpr_at_1fpr"] == 1.0
    assert "tpr_at_01fpr" not in perfect  # 100 non-members cannot resolve an FPR of 0.1%
    assert curves["roc_fpr"][0] == 0.0 and max(t for f, t in zip(*curves.values()) if f == 0.0) == 1.0
    assert len(curves["roc_fpr"]) == len(curves["roc_tpr"])
    reversed_, _ = ranking(truth, -scores)
    assert reversed_["auc"] == 0.0 and reversed_["tpr_at_1fpr"] == 0.0


def test_classification_metrics_follow_the_predictions() -> None:
    truth = np.array([1, 1, 0, 0])
    metrics, _ = all_metrics(truth, np.array([1, 0, 0, 0]), np.array([0.9, 0.4, 0.3, 0.2]))
    assert metrics["accuracy"] == 0.75 and metrics["precision"] == 1.0
    assert metrics["recall"] == 0.5 and metrics["f1"] == pytest.approx(2 / 3)


def test_threshold_separates_shadow_records() -> None:
    scores, labels = np.array([-3.0, -2.5, -0.2, -0.1]), np.array([0, 0, 1, 1])
    t = best_threshold(scores, labels)
    assert -2.5 < t <= -0.2
