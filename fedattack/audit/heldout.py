"""The multi-run audit's bound: one threshold, chosen on held-out runs, tested on the others.

Independent runs give samples of the mechanism's two outputs ("in" and "out" scores). At a
threshold t (guess "in" when direction x score >= t) the false-positive and false-negative rates
have one-sided Clopper-Pearson upper bounds FPR_hi and FNR_hi, each at level alpha / 2, so both
hold together with probability at least 1 - alpha, and then (Nasr et al. 2023, "Tight auditing
of differentially private machine learning", Section 3)

    epsilon >= log((1 - delta - FNR_hi) / FPR_hi)   and the same with the roles swapped,
    mu      >= Phi^-1(1 - FNR_hi) - Phi^-1(FPR_hi)

because an (epsilon, delta)-DP mechanism allows no test with both rates lower, and a mu-GDP one
(trade-off curve G_mu(a) = Phi(Phi^-1(1 - a) - mu)) none below its curve. The first bound assumes
nothing; the second is about the Gaussian-DP parameter, and the epsilon it implies at the claim's
delta (`gdp.epsilon_of_mu`) is a bound on epsilon only for a mechanism whose trade-off curve has
the Gaussian shape, as Gaussian noise on a clipped sum has (a randomised response, say, would be
"refuted" by it at its own, valid, epsilon).

Choosing the best of many thresholds on the same runs is a multiple test; a Bonferroni correction
over 19 of them costs a factor about 1.6 in the interval's width, and a mu near the claim needs
thousands of runs per side even without it. So a seeded draw that never sees the coins or the
scores sets SELECT of the runs aside; on them the threshold and the direction are chosen (`choose`:
from a Gaussian fit of those runs), and only that one threshold is tested, at the full alpha, on
the rest.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import beta, norm

from fedattack.audit.gdp import epsilon_of_mu
from fedattack.rng import numpy_rng

# share of the runs that only choose the threshold, searched on ideal Gaussian scores (seeds 0-19,
# none of them measured runs; docs/defences.md "Many runs"): 0.05, 0.10 and 0.25 within 1%
SELECT = 0.10
GRID = 241  # thresholds tried along the fitted pair, from 3 spreads below "out" to 3 above "in"


def upper(k: float, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound of a rate, k of n, at level alpha (k may be fractional:
    a rate projected onto another sample size, when choosing)."""
    return 1.0 if k >= n else float(beta.ppf(1 - alpha, k + 1, n - k))


def choosing(runs: int, seed: int, share: float = SELECT) -> np.ndarray:
    """Which runs choose the threshold (True) and which test it: a draw of the seed alone."""
    k = min(runs - 2, max(4, round(share * runs)))  # a fit needs a few runs even of a small audit
    mask = np.zeros(runs, dtype=bool)
    mask[numpy_rng(seed, "audit:choose-threshold").permutation(runs)[:k]] = True
    return mask


def rate_bounds(fp: float, n_out: int, fn: float, n_in: int, delta: float, alpha: float) -> dict[str, float]:
    """Both bounds from the errors at one threshold, each rate bounded at alpha / 2."""
    fpr, fnr = upper(fp, n_out, alpha / 2), upper(fn, n_in, alpha / 2)
    eps = max(_log_ratio(1 - delta - fnr, fpr), _log_ratio(1 - delta - fpr, fnr))
    mu = max(0.0, float(norm.ppf(1 - fnr) - norm.ppf(fpr))) if fpr < 1 and fnr < 1 else 0.0
    return {"epsilon": eps, "mu": mu, "fpr_hi": fpr, "fnr_hi": fnr}


def _log_ratio(a: float, b: float) -> float:
    return max(0.0, math.log(a / b)) if a > 0 and b > 0 else 0.0


def errors(s_in: np.ndarray, s_out: np.ndarray, direction: int, t: float) -> tuple[int, int]:
    """False positives ("out" runs guessed in) and false negatives at `direction` x score >= t."""
    return int((direction * s_out >= t).sum()), int((direction * s_in < t).sum())


def choose(s_in: np.ndarray, s_out: np.ndarray, n_in: int, n_out: int, delta: float,
           alpha: float) -> tuple[int, float]:
    """The direction and threshold that the choosing runs' Gaussian fit says give the largest mu
    bound at the tested runs' sizes.

    The fit (each side's mean, their pooled spread) rather than the choosing runs' own error
    counts: a few hundred runs' counts in a distribution's tail are noise, and picking the best
    of many noisy counts put the threshold far out (a tested false-positive rate of 0.57 or 0.02
    where 0.45 was best), which widened the tested interval; the fit's threshold stays near the
    middle that the Gaussian mechanism's optimum has. Only the threshold depends on the fit: the
    bound is the tested runs' Clopper-Pearson one whatever the scores' shape."""
    direction = 1 if s_in.mean() >= s_out.mean() else -1
    m_in, m_out = direction * s_in.mean(), direction * s_out.mean()
    spread = math.sqrt((s_in.var(ddof=1) + s_out.var(ddof=1)) / 2) if min(len(s_in), len(s_out)) > 1 else 0.0
    if not spread > 0:
        return direction, float((m_in + m_out) / 2)
    best = (-1.0, (m_in + m_out) / 2)
    for t in np.linspace(m_out - 3 * spread, m_in + 3 * spread, GRID):
        fpr, fnr = float(norm.sf((t - m_out) / spread)), float(norm.cdf((t - m_in) / spread))
        mu = rate_bounds(fpr * n_out, n_out, fnr * n_in, n_in, delta, alpha)["mu"]
        if mu > best[0]:
            best = (mu, float(t))
    return direction, best[1]


def heldout_bounds(scores: np.ndarray, inside: np.ndarray, seed: int, delta: float,
                   confidence: float) -> dict[str, Any]:
    """Both bounds at the threshold the choosing runs pick, tested on the other runs."""
    alpha, pick = 1 - confidence, choosing(len(scores), seed)
    c_in, c_out = scores[pick & inside], scores[pick & ~inside]
    t_in, t_out = scores[~pick & inside], scores[~pick & ~inside]
    if min(len(c_in), len(c_out), len(t_in), len(t_out)) < 1:
        return {"epsilon": 0.0, "mu": 0.0, "epsilon_of_mu": 0.0, "note": "too few runs in or out on a side"}
    direction, t = choose(c_in, c_out, len(t_in), len(t_out), delta, alpha)
    fp, fn = errors(t_in, t_out, direction, t)
    found = rate_bounds(fp, len(t_out), fn, len(t_in), delta, alpha)
    return {**found, "epsilon_of_mu": epsilon_of_mu(found["mu"], delta), "direction": direction,
            "threshold": t, "choosing_runs": int(pick.sum()), "tested_in": len(t_in), "tested_out": len(t_out),
            "false_positives": fp, "false_negatives": fn}
