"""The Gaussian-DP one-run bound (Mahloujifar, Melis and Chaudhuri 2024): valid where the truth is
known (exact mu-GDP scores), tighter than the epsilon-delta bound on the same scores, and its
conversions between mu and (epsilon, delta) agree with the closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from fedattack.audit import audit
from fedattack.audit.gdp import audit_gdp, epsilon_of_mu, gdp_delta, gdp_rejected, mu_of_epsilon


def test_conversions_match_the_closed_form() -> None:
    assert gdp_delta(1.0, 0.0) == pytest.approx(norm.cdf(0.5) - norm.cdf(-0.5))
    for mu in (0.3, 1.0, 3.0):
        eps = epsilon_of_mu(mu, 1e-5)
        assert gdp_delta(mu, eps) == pytest.approx(1e-5, rel=1e-3)
        assert mu_of_epsilon(eps, 1e-5) == pytest.approx(mu, rel=1e-4)
    assert epsilon_of_mu(0.0, 1e-5) == 0.0


def test_chance_level_guesses_reject_nothing_and_perfect_ones_reject_small_mu() -> None:
    assert not gdp_rejected(0.0, 1000, 100, 50, 0.05)
    assert gdp_rejected(0.5, 1000, 100, 100, 0.05)
    assert not gdp_rejected(20.0, 1000, 100, 100, 0.05)


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_the_bound_never_exceeds_the_true_mu(mu: float) -> None:
    """Scores N(mu * included, 1) are exactly mu-GDP per canary: at 95% confidence the bound
    exceeds mu in at most 3 of 20 runs (probability 7.5% at the 5% rate), and is not vacuous."""
    found = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        included = rng.random(500) < 0.5
        found.append(audit_gdp(rng.normal(size=500) + mu * included, included, 1e-5).mu)
    assert sum(f > mu for f in found) <= 3, found
    assert np.mean(found) > 0.2 * mu, found


def test_it_is_tighter_than_the_epsilon_delta_bound_on_the_same_scores() -> None:
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    scores = rng.normal(size=1000) + 2.0 * included
    gdp, steinke = audit_gdp(scores, included, 1e-5), audit(scores, included, 1e-5)
    assert gdp.epsilon > steinke.epsilon > 0
    assert gdp.epsilon < epsilon_of_mu(2.0, 1e-5)
    assert math.isclose(gdp.epsilon, epsilon_of_mu(gdp.mu, 1e-5))
