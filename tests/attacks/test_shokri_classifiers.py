"""Shokri's attack classifiers (issue #47): torch-mlp against scikit-learn's MLP, determinism,
the per-class rule, and the all-class model fitted only when a query needs it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from fedattack.attacks.membership.shokri import MIN_PER_SIDE, fit_attack_models, predict_membership


def records(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3 classes, 10 features; members' features shifted by `shift` (0: labels carry nothing)."""
    rng = np.random.default_rng(seed)
    labels, member = rng.integers(0, 3, n), rng.integers(0, 2, n)
    return rng.normal(size=(n, 10)) + shift * member[:, None] + 0.3 * labels[:, None], labels, member


def auc(kind: str, shift: float) -> float:
    torch.set_num_threads(1)
    feats, labels, member = records(900, shift, 0)
    q_feats, q_labels, q_member = records(900, shift, 1)
    models = fit_attack_models(feats, labels, member, kind, 7, q_labels)
    return float(roc_auc_score(q_member, predict_membership(models, q_feats, q_labels)))


def test_torch_mlp_matches_scikit_learns_mlp_on_a_separable_set() -> None:
    torch_auc, sk_auc = auc("torch-mlp", 0.6), auc("mlp", 0.6)
    assert torch_auc > 0.75  # 900 queries: chance would be 0.5 +- 0.04
    assert abs(torch_auc - sk_auc) < 0.03


def test_torch_mlp_is_at_chance_on_random_labels() -> None:
    assert abs(auc("torch-mlp", 0.0) - 0.5) < 0.07  # 3 sigma of the AUC of 900 random queries


def test_same_seed_same_scores_and_another_seed_differs() -> None:
    feats, labels, member = records(300, 0.6, 0)
    runs = [predict_membership(fit_attack_models(feats, labels, member, "torch-mlp", s), feats, labels)
            for s in (3, 3, 4)]
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("kind", ["torch-mlp", "logreg"])
def test_a_class_short_of_min_per_side_is_judged_by_the_all_class_model(kind: str) -> None:
    feats, labels, member = records(300, 0.6, 0)
    few = np.flatnonzero((labels == 2) & (member == 1))[MIN_PER_SIDE - 1:]
    keep = np.setdiff1d(np.arange(300), few)  # class 2 keeps MIN_PER_SIDE - 1 members
    feats, labels, member = feats[keep], labels[keep], member[keep]
    models = fit_attack_models(feats, labels, member, kind, 0, labels)
    assert sorted(models["per_class"]) == [0, 1]
    rows = labels == 2
    expected = models["overall"].predict_proba(feats[rows])[:, 1]
    assert np.array_equal(predict_membership(models, feats, labels)[rows], expected)


@pytest.mark.parametrize("kind", ["torch-mlp", "logreg"])
def test_the_all_class_model_is_fitted_only_when_a_query_needs_it(kind: str) -> None:
    feats, labels, member = records(300, 0.6, 0)
    lazy = fit_attack_models(feats, labels, member, kind, 0, labels)
    full = fit_attack_models(feats, labels, member, kind, 0)
    assert lazy["overall"] is None and full["overall"] is not None
    if kind == "logreg":  # the per-class models do not depend on whether the all-class one is fitted
        assert np.array_equal(predict_membership(lazy, feats, labels), predict_membership(full, feats, labels))


@pytest.mark.parametrize("kind", ["mlp", "torch-mlp"])
def test_epochs_caps_the_mlp_fit(kind: str) -> None:
    """`epochs` is the MLP's most passes: one pass stops short of what 500 fit."""
    feats, labels, member = records(300, 0.6, 0)
    one = fit_attack_models(feats, labels, member, kind, 0, labels, epochs=1)
    full = fit_attack_models(feats, labels, member, kind, 0, labels, epochs=500)
    assert not np.array_equal(predict_membership(one, feats, labels), predict_membership(full, feats, labels))


def test_epochs_below_one_is_refused() -> None:
    from fedattack.attacks.membership.shokri import MembershipSettings
    from fedattack.registry import UserError
    with pytest.raises(UserError, match="epochs=0"):
        MembershipSettings(epochs=0)
