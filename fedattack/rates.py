"""True-positive rates at a low false-positive rate: what a query set can resolve, and chance.

Shared by the membership attacks (which score with them) and the reports (which state them),
so the two can never disagree about what "TPR at 1% FPR" or its chance level means.

The estimator: with n0 non-members and a target FPR alpha, at most k = floor(alpha n0)
non-members may be false positives, so the threshold sits at the (k+1)-th largest non-member
score and a member counts when it scores strictly above it. The FPR actually achieved on the
query set is k / n0 (no more than alpha). A scorer that only guesses (scores independent of
membership, no ties) then finds a member with probability (k+1) / (n0+1): the chance that a
member's score lands above the (k+1)-th largest of n0 exchangeable non-members. That is the
chance level, not alpha: with 1,000 non-members at alpha = 0.1%, one false positive is allowed
(0.1%) and chance is 2/1001 = 0.2%.
"""

from __future__ import annotations

import math

import numpy as np

# FPRs a report states a TPR at, lowest first: the lowest one a query set resolves is used.
FPR_LADDER = (0.001, 0.01, 0.1)


def allowed_false_positives(alpha: float, nonmembers: int) -> int:
    """k = floor(alpha n0): how many non-members may score above the threshold (at most n0 - 1)."""
    return max(0, min(int(math.floor(alpha * nonmembers + 1e-9)), nonmembers - 1))


def measurable(alpha: float, nonmembers: int) -> bool:
    """An FPR of alpha is resolved only if at least one non-member may be a false positive."""
    return alpha * nonmembers >= 1 - 1e-9


def achieved_fpr(alpha: float, nonmembers: int) -> float:
    """The FPR the estimator actually allows on this query set: k / n0."""
    return allowed_false_positives(alpha, nonmembers) / nonmembers if nonmembers else math.nan


def chance_tpr(alpha: float, nonmembers: int) -> float:
    """What a scorer that only guesses is expected to reach with this estimator: (k+1)/(n0+1)."""
    if nonmembers <= 0:
        return math.nan
    return (allowed_false_positives(alpha, nonmembers) + 1) / (nonmembers + 1)


def tpr_at_fpr(members: np.ndarray, nonmembers: np.ndarray, alpha: float, axis: int = -1) -> np.ndarray:
    """The best TPR at FPR <= alpha: members above the (k+1)-th largest non-member."""
    k = allowed_false_positives(alpha, nonmembers.shape[axis])
    threshold = -np.partition(-nonmembers, k, axis=axis).take([k], axis=axis)
    return np.asarray((members > threshold).mean(axis=axis))


def tpr_from_roc(fpr: list[float], tpr: list[float], alpha: float) -> float:
    """The best TPR at FPR <= alpha read off a recorded ROC curve (its corner points)."""
    best = [t for f, t in zip(fpr, tpr) if f is not None and t is not None and f <= alpha + 1e-12]
    return float(max(best)) if best else math.nan


def lowest_supported(nonmembers: list[int]) -> float | None:
    """The lowest FPR of the ladder that every query set resolves (None: not even the highest)."""
    if not nonmembers:
        return None
    return next((a for a in FPR_LADDER if all(measurable(a, n) for n in nonmembers)), None)


def percent(alpha: float) -> str:
    """'0.1%', '1%', '10%': an FPR as the sentences say it."""
    return f"{alpha * 100:g}%"
