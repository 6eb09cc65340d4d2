"""Issue #39's statistics: chance at the FPR the estimator achieves, and intervals in summary.json.

- A scorer that only guesses, measured with the project's TPR-at-FPR estimator, reaches
  (k+1)/(n0+1) on average (k = floor(alpha n0) false positives allowed), not alpha: 0.2% at
  0.1% FPR with 1,000 non-members. Checked by simulation, against the formula and against alpha.
- summary.json: every mean (metrics and baselines) carries its interval over victims, flagged
  when it rests on fewer than five; the pooled membership metrics carry a two-level bootstrap
  interval (victims, then their queries) and their chance levels.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedattack import rates
from fedattack.attacks.evaluation.summary import summarize
from fedattack.attacks.membership.family import per_query
from fedattack.attacks.membership.metrics import statistics
from fedattack.results import AttackResult


@pytest.mark.parametrize(("alpha", "n0"), [(0.001, 1000), (0.01, 1000), (0.01, 150), (0.1, 19)])
def test_a_guessing_scorer_reaches_the_chance_level_not_alpha(alpha: float, n0: int) -> None:
    rng = np.random.default_rng(7)
    trials, members = 4000, 200
    tpr = rates.tpr_at_fpr(rng.random((trials, members)), rng.random((trials, n0)), alpha, axis=-1)
    expected = rates.chance_tpr(alpha, n0)
    se = np.sqrt(expected * (1 - expected) / members) / np.sqrt(trials)
    assert abs(tpr.mean() - expected) < 4 * se
    k = rates.allowed_false_positives(alpha, n0)
    assert rates.achieved_fpr(alpha, n0) == k / n0 <= alpha
    if (k + 1) / (n0 + 1) - alpha > 8 * se:  # where the two differ measurably, alpha is wrong
        assert abs(tpr.mean() - alpha) > 4 * se


def test_the_issues_case_is_two_in_a_thousand() -> None:
    assert rates.chance_tpr(0.001, 1000) == pytest.approx(2 / 1001)
    assert rates.achieved_fpr(0.001, 1000) == 0.001
    truth = np.r_[np.ones(50, bool), np.zeros(1000, bool)]
    recorded = statistics(truth, np.random.default_rng(0).random(1050))
    assert recorded["chance_tpr"]["tpr_at_01fpr"] == pytest.approx(2 / 1001)
    assert recorded["fpr_achieved"] == {"tpr_at_1fpr": 0.01, "tpr_at_01fpr": 0.001}


def membership(victim: int, rng: np.random.Generator, members: int = 30, nonmembers: int = 60) -> AttackResult:
    truth = np.r_[np.ones(members, int), np.zeros(nonmembers, int)]
    scores = rng.normal(0, 1, len(truth)) + 0.8 * truth
    auc = float(rng.uniform(0.6, 0.8))
    return AttackResult(attack="membership", threat_model="eavesdropper", run={}, victim=victim,
                        metrics={"auc": auc}, baselines={"loss-threshold": {"auc": auc - 0.05}},
                        extra={"membership": {"members": members, "nonmembers": nonmembers,
                                              "per_query": per_query(scores, truth)}})


def test_every_mean_and_the_pooled_metrics_carry_an_interval() -> None:
    rng = np.random.default_rng(3)
    (few,) = summarize([membership(v, rng) for v in range(3)])
    auc = few["metrics"]["auc"]
    assert auc["interval"]["low"] <= auc["mean"] <= auc["interval"]["high"]
    assert "about their range" in auc["interval"]["note"]  # 3 victims
    assert few["baselines"]["loss-threshold"]["auc"]["interval"]["high"] is not None
    (many,) = summarize([membership(v, rng) for v in range(6)])
    assert "note" not in many["metrics"]["auc"]["interval"]
    pooled = many["queries"]["pooled"]
    low, high = pooled["ci"]["auc"]
    assert low < pooled["metrics"]["auc"] < high and high - low < 0.2
    assert pooled["ci_method"].startswith("two-level")
    assert pooled["chance_tpr"]["tpr_at_1fpr"] == pytest.approx(rates.chance_tpr(0.01, 360))
    (one,) = summarize([membership(0, rng)])
    assert one["metrics"]["auc"]["interval"]["low"] is None  # one victim: no interval, not a zero-width one
