"""`classifier=mlp` is fitted by adam_mlp.py, not scikit-learn (issue #47): held to scikit-learn's
`make_pipeline(StandardScaler(), MLPClassifier((64,)))` bit for bit on every shape the attack's
records take (fewer rows than a minibatch, a ragged last minibatch, a constant feature, a fit that
stops early, one that runs to max_iter), and inside the attack's own per-class fit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from fedattack.attacks.membership.adam_mlp import AdamMLP
from fedattack.attacks.membership.shokri import fit_attack_models, predict_membership


def reference(seed: int, max_iter: int) -> object:
    return make_pipeline(StandardScaler(), MLPClassifier((64,), max_iter=max_iter, random_state=seed))


def records(n: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)) * rng.uniform(0.1, 30.0, features)
    x[:, 0] = -4.0  # a constant column: the scaler divides it by 1
    return x, (x[:, 1] + rng.normal(size=n) > 0).astype(int)


@pytest.mark.parametrize("n, features, max_iter", [(37, 10, 300), (200, 10, 40), (613, 10, 500),
                                                   (1013, 5, 500), (2400, 11, 25)])
def test_fit_is_scikit_learns_bit_for_bit(n: int, features: int, max_iter: int) -> None:
    x, y = records(n, features, n)
    queries = np.random.default_rng(1).normal(size=(300, features)) * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theirs = reference(n + 3, max_iter).fit(x, y)
    ours = AdamMLP(n + 3, max_iter).fit(x, y)
    assert ours.n_iter_ == theirs[-1].n_iter_
    for mine, sk in zip(ours.params, theirs[-1].coefs_ + theirs[-1].intercepts_):
        assert np.array_equal(mine, sk)
    assert np.array_equal(ours.predict_proba(queries), theirs.predict_proba(queries))


def test_both_ways_of_ending_are_covered() -> None:
    """The cases above include a fit that stops on the loss and one that runs out of epochs."""
    ended = []
    for n, features, max_iter in [(1013, 5, 500), (2400, 11, 25)]:
        x, y = records(n, features, n)
        ended.append(AdamMLP(n + 3, max_iter).fit(x, y).n_iter_ < max_iter)
    assert ended == [True, False]


def test_attack_models_score_as_scikit_learns() -> None:
    rng = np.random.default_rng(5)
    labels, member = rng.integers(0, 3, 1500), rng.integers(0, 2, 1500)
    feats = rng.normal(size=(1500, 10)) + 0.5 * member[:, None]
    models = fit_attack_models(feats, labels, member, "mlp", 11, labels, epochs=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theirs = {c: reference((11 + c) % 2**32, 60).fit(feats[labels == c], member[labels == c]) for c in range(3)}
    expected = np.zeros(len(labels))
    for c, model in theirs.items():
        expected[labels == c] = model.predict_proba(feats[labels == c])[:, 1]
    assert np.array_equal(predict_membership(models, feats, labels), expected)


def test_one_sided_records_are_refused() -> None:
    with pytest.raises(ValueError, match="both members and non-members"):
        AdamMLP(0).fit(np.zeros((10, 3)), np.ones(10, int))
