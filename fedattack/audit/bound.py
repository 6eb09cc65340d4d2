"""The epsilon lower bound of one training run (Steinke, Nasr and Jagielski, NeurIPS 2023).

m canaries are each included with probability 1/2, independently. The auditor scores every
canary from what it sees, guesses "in" for the k+ highest scores and "out" for the k- lowest,
and abstains on the rest: r = k+ + k- guesses, v of them correct. Their Theorem 5.2: if the
training run is (epsilon, delta)-DP with respect to flipping one canary, then for every v

    P[W >= v] <= P[B >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= B < v] / i,
    B ~ Binomial(r, e^eps / (1 + e^eps)),

so the right-hand side is a p-value for the hypothesis "the run is (epsilon, delta)-DP". The
audited epsilon is the largest epsilon that this p-value rejects at the stated confidence.
Choosing the best of several (k+, k-) after seeing the scores would be a multiple test, so
every choice in the grid is tested at (1 - confidence) / len(grid) (Bonferroni): the reported
bound holds at the stated confidence whichever choice wins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import expit
from scipy.stats import binom

FRACTIONS = (0.05, 0.1, 0.25, 0.5)  # share of the canaries guessed on each side (or on one side)
EPSILON_CAP = 64.0  # beyond this, binomial tails underflow; a bound that large is "unbounded"


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The probability of at least v correct guesses out of r if the run is (epsilon, delta)-DP."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = float(expit(epsilon))  # the accuracy of epsilon-DP randomised response
    tail = float(binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[B = v-1], P[B = v-2], ..., P[B = 0]
    worst = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2 * m * delta * worst, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, significance: float) -> float:
    """The largest epsilon whose (epsilon, delta)-DP hypothesis v correct guesses reject at
    `significance` (0 when even epsilon = 0 is not rejected); found by bisection."""
    def rejected(eps: float) -> bool:
        return p_value(m, r, v, eps, delta) <= significance

    if not rejected(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejected(hi):
        if hi >= EPSILON_CAP:
            return EPSILON_CAP
        lo, hi = hi, hi * 2
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo


@dataclass(frozen=True)
class AuditBound:
    """The best bound of the grid, with the guesses that gave it."""

    epsilon: float          # the audited epsilon: (epsilon, delta)-DP is rejected at `confidence`
    confidence: float
    delta: float
    canaries: int           # m
    guesses: int            # r = k+ + k-
    correct: int            # v
    positives: int          # k+
    negatives: int          # k-
    choices: int            # size of the Bonferroni-corrected grid

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def guess_grid(m: int, fractions: Sequence[float] = FRACTIONS) -> list[tuple[int, int]]:
    """(k+, k-) pairs: k on both sides, or k "in" guesses only, for each fraction of m."""
    ks = sorted({max(1, math.floor(f * m)) for f in fractions if max(1, math.floor(f * m)) * 2 <= m})
    return [*((k, k) for k in ks), *((k, 0) for k in ks)]


def graded_guesses(scores: Sequence[float], included: Sequence[bool],
                   fractions: Sequence[float] = FRACTIONS) -> list[tuple[int, int, int]]:
    """(k+, k-, right) for each guess of the grid: the canaries ranked by score (higher: more
    likely included), the top k+ guessed in, the bottom k- out, and how many of them were right.
    Every bound over the grid (epsilon-delta here, Gaussian DP in `gdp`) reads the same guesses."""
    m = len(scores)
    if m != len(included) or m < 2:
        raise ValueError("need one membership bit per score and at least two canaries")
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    truth = np.asarray(included, dtype=bool)[order]
    return [(pos, neg, int(truth[:pos].sum()) + int((~truth[m - neg:]).sum() if neg else 0))
            for pos, neg in guess_grid(m, fractions)]


def audit(scores: Sequence[float], included: Sequence[bool], delta: float,
          confidence: float = 0.95) -> AuditBound:
    """The audited epsilon from per-canary scores (higher: more likely included)."""
    m, grid = len(scores), graded_guesses(scores, included)
    significance = (1 - confidence) / len(grid)
    best: AuditBound | None = None
    for pos, neg, v in grid:
        eps = epsilon_lower_bound(m, pos + neg, v, delta, significance)
        if best is None or eps > best.epsilon:
            best = AuditBound(eps, confidence, delta, m, pos + neg, v, pos, neg, len(grid))
    assert best is not None
    return best
