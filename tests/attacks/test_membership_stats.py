"""The membership family's statistics: exact where they can be, honest where they cannot.

The confidence intervals are checked against a simulation where the truth is known: Gaussian
scores, members shifted by d, so AUC = Phi(d / sqrt 2) and TPR at FPR alpha = 1 - Phi(z_(1-alpha) - d).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats
from sklearn import metrics as skm

from fedattack.attacks.membership.metrics import chance_test, intervals, measurable, ranking, statistics, tpr_at_fpr
from fedattack.attacks.membership.reference_models import logit_confidence


def simulate(rng: np.random.Generator, d: float, n1: int, n0: int) -> tuple[np.ndarray, np.ndarray]:
    truth = np.r_[np.ones(n1, bool), np.zeros(n0, bool)]
    return truth, np.r_[rng.normal(d, 1, n1), rng.normal(0, 1, n0)]


def test_tpr_at_fpr_is_the_best_tpr_on_the_roc_at_that_fpr() -> None:
    rng = np.random.default_rng(0)
    truth, scores = simulate(rng, 1.0, 300, 700)
    scores = scores.round(1)  # ties, as discrete scores give
    fpr, tpr, _ = skm.roc_curve(truth, scores)
    for alpha in (0.01, 0.05, 0.2):
        assert tpr_at_fpr(scores[truth], scores[~truth], alpha) == tpr[fpr <= alpha + 1e-12].max()
    metrics, curves = ranking(truth, scores)
    assert np.isclose(np.trapezoid(curves["roc_tpr"], curves["roc_fpr"]), metrics["auc"])
    assert np.isclose(metrics["auc"], skm.roc_auc_score(truth, scores))


def test_a_tpr_below_one_over_the_non_members_is_not_measurable() -> None:
    assert measurable(0.01, 100) and not measurable(0.01, 99) and not measurable(0.001, 999)
    truth, scores = simulate(np.random.default_rng(1), 2.0, 50, 50)
    metrics, _ = ranking(truth, scores)
    assert "tpr_at_1fpr" not in metrics and "tpr_at_01fpr" not in metrics
    info = statistics(truth, scores)
    assert info["not_measurable"] == ["tpr_at_1fpr", "tpr_at_01fpr"] and "50 non-members" in info["not_measurable_note"]
    assert set(info["ci"]) == {"auc"}


def test_bootstrap_intervals_cover_the_known_truth() -> None:
    d, alpha, sims = 1.0, 0.01, 25
    true_auc = stats.norm.cdf(d / np.sqrt(2))
    true_tpr = 1 - stats.norm.cdf(stats.norm.ppf(1 - alpha) - d)
    rng = np.random.default_rng(2)
    hits = np.zeros(2)
    for i in range(sims):
        truth, scores = simulate(rng, d, 300, 1000)
        ci = intervals(truth, scores, seed=i)
        hits += [ci["auc"][0] <= true_auc <= ci["auc"][1], ci["tpr_at_1fpr"][0] <= true_tpr <= ci["tpr_at_1fpr"][1]]
    assert hits[0] / sims >= 0.85 and hits[1] / sims >= 0.8  # nominal 95%; percentile bootstrap


def test_intervals_are_seeded() -> None:
    truth, scores = simulate(np.random.default_rng(3), 0.5, 100, 100)
    assert intervals(truth, scores) == intervals(truth, scores)


def test_the_chance_test_rejects_a_signal_and_rarely_rejects_noise() -> None:
    rng = np.random.default_rng(4)
    false_alarms = sum(chance_test(*simulate(rng, 0.0, 100, 100))["distinguishable_from_chance"]
                       for _ in range(100))
    assert false_alarms <= 10
    assert chance_test(*simulate(rng, 0.5, 200, 200))["p_value"] < 1e-3


def test_logit_confidence_is_stable_where_p_rounds_to_one() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0], [100.0, 0.0, 0.0]])
    logp = logits.log_softmax(1)
    phi = logit_confidence(logp, np.array([2, 0]))
    p = logits[0].softmax(0)[2].item()
    assert np.isclose(phi[0], np.log(p / (1 - p)), rtol=1e-5)
    assert np.isclose(phi[1], 100.0 - np.log(2.0), rtol=1e-6)  # naive log(p/(1-p)) is inf here
