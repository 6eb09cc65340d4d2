"""The Gaussian-DP lower bound of one training run (Mahloujifar, Melis and Chaudhuri, arXiv 2410.22235).

Steinke et al.'s bound (`bound.py`) tests (epsilon, delta)-DP, whose guessing accuracy is capped
at e^eps / (1 + e^eps) however few guesses the auditor makes. A Gaussian mechanism is tighter
than that description: its few most confident guesses can be right far more often. Testing the
hypothesis "mu-GDP with respect to every canary" (trade-off curve G_mu(a) = Phi(Phi^-1(1-a) - mu))
uses that, so the same scores prove a larger privacy loss.

The test (the paper's recursion for the guessing game, written here from its statement): with
m canaries, r guesses and v of them right, suppose P[at least v right] >= tau. Walking down
from i = v to 0, the least probability mass the guesses need, r_i on right and h_i on wrong
guesses, obeys

    r_v = tau v / m,  h_v = tau (r - v) / m,
    h_i = max(h_{i+1}, Gbar^-1(r_{i+1})),   Gbar^-1(x) = Phi(Phi^-1(x) - mu),
    r_i = r_{i+1} + i / (r - i) * (h_i - h_{i+1}),

and mu-GDP is impossible (rejected at level tau) when r_0 + h_0 exceeds r / m, the mass r guesses
out of m can hold. The audited mu is the largest mu rejected; it is reported with the epsilon it
implies at the claim's delta (Dong, Roth and Su: delta(eps) = Phi(-eps/mu + mu/2) - e^eps
Phi(-eps/mu - mu/2)). The guess grid and its Bonferroni correction are those of `bound.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.optimize import brentq
from scipy.special import ndtr, ndtri
from scipy.stats import norm

from fedattack.audit.bound import graded_guesses

MU_CAP = 40.0  # beyond this the trade-off curve underflows: a bound that large is "unbounded"
FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.25, 0.5)  # the GDP test gains from a few very confident guesses


def gdp_rejected(mu: float, m: int, r: int, v: int, significance: float) -> bool:
    """Whether v right guesses out of r (of m canaries) reject mu-GDP at `significance`."""
    if not 0 <= v <= r <= m or r == 0:
        raise ValueError(f"need 0 <= v <= r <= m and r >= 1, got v={v}, r={r}, m={m}")
    right, wrong = significance * v / m, significance * (r - v) / m
    for i in range(v - 1, -1, -1):
        blown = float(ndtr(ndtri(right) - mu)) if right > 0 else 0.0
        grown = max(wrong, blown)
        right, wrong = right + i / (r - i) * (grown - wrong), grown
    return right + wrong > r / m


def mu_lower_bound(m: int, r: int, v: int, significance: float) -> float:
    """The largest mu whose mu-GDP hypothesis the guesses reject (0 when none is); bisection."""
    if not gdp_rejected(0.0, m, r, v, significance):
        return 0.0
    lo, hi = 0.0, 1.0
    while gdp_rejected(hi, m, r, v, significance):
        if hi >= MU_CAP:
            return MU_CAP
        lo, hi = hi, hi * 2
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gdp_rejected(mid, m, r, v, significance) else (lo, mid)
    return lo


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP, in logs so that e^eps times a tiny Phi does not overflow."""
    if mu <= 0:
        return 0.0
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon + norm.logcdf(-epsilon / mu - mu / 2)))


def epsilon_of_mu(mu: float, delta: float) -> float:
    """The epsilon that mu-GDP implies at `delta` (0 when mu-GDP already has delta(0) <= delta)."""
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-6))


def mu_of_epsilon(epsilon: float, delta: float) -> float:
    """The mu whose GDP curve passes through (epsilon, delta): the claim seen as GDP."""
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:
        hi *= 2
    return float(brentq(lambda u: gdp_delta(u, epsilon) - delta, 1e-9, hi, xtol=1e-7))


@dataclass(frozen=True)
class GDPBound:
    """The best GDP bound of the grid: mu, the epsilon it implies at delta, and the guesses."""

    mu: float
    epsilon: float
    confidence: float
    delta: float
    canaries: int
    guesses: int
    correct: int
    positives: int
    negatives: int
    choices: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def audit_gdp(scores: Sequence[float], included: Sequence[bool], delta: float,
              confidence: float = 0.95) -> GDPBound:
    """The audited mu (and epsilon at `delta`) from per-canary scores (higher: more likely in)."""
    m, grid = len(scores), graded_guesses(scores, included, FRACTIONS)
    significance = (1 - confidence) / len(grid)
    best: GDPBound | None = None
    for pos, neg, v in grid:
        mu = mu_lower_bound(m, pos + neg, v, significance)
        if best is None or mu > best.mu:
            best = GDPBound(mu, 0.0, confidence, delta, m, pos + neg, v, pos, neg, len(grid))
    assert best is not None
    return GDPBound(**{**best.to_json(), "epsilon": epsilon_of_mu(best.mu, delta)})
