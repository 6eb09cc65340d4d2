"""Membership-inference statistics that hold (scikit-learn, scipy).

Scores are "more likely a member" when higher; predictions are 0/1.

- The ROC is kept at full resolution: every threshold where the curve turns (scikit-learn's
  corner points; the points it drops lie on straight segments, so nothing is lost), rounded
  to 8 digits so a result file stays small.
- TPR at a false-positive rate alpha is the best TPR whose FPR is at most alpha
  (`fedattack.rates`, shared with the reports). With n0 non-members the smallest FPR above
  zero is 1/n0, so below it the number says nothing about the attack (Carlini et al. 2022's
  point is exactly the low-FPR regime): it is *not measurable*, left out of the metrics and
  named in `not_measurable`. Where it is measurable, its chance level is what a guessing
  scorer reaches with this estimator, (k+1)/(n0+1) for k = floor(alpha n0) allowed false
  positives, not alpha itself (0.2%, not 0.1%, at 0.1% FPR with 1,000 non-members): recorded
  beside the metrics as `chance_tpr`, with the FPR actually achieved, `fpr_achieved`.
- Bootstrap confidence intervals (`scipy.stats.bootstrap`, percentile, seeded) resample members
  and non-members separately (a stratified bootstrap: the query set's composition is fixed by
  the protocol, and every resample has both classes, so AUC is always defined).
- "Distinguishable from chance" is the one-sided Mann-Whitney U test of members scoring above
  non-members (AUC = U / (n1 n0), so it is the exact test of AUC > 0.5).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats
from sklearn import metrics as skm

from fedattack.rates import achieved_fpr, chance_tpr, measurable, tpr_at_fpr

__all__ = ["FPR_LEVELS", "achieved_fpr", "all_metrics", "auc_of", "chance_tpr", "chance_test", "classification",
           "intervals", "measurable", "pooled", "ranking", "roc", "statistics", "tpr_at_fpr"]
FPR_LEVELS = {"tpr_at_1fpr": 0.01, "tpr_at_01fpr": 0.001}
CONFIDENCE = 0.95
RESAMPLES = 1000
CHANCE_ALPHA = 0.05  # the test's level for `distinguishable_from_chance`
BOOTSTRAP_SEED = 20  # fixed: the same scores give the same interval, bit for bit


def classification(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Accuracy is balanced (the mean of TPR and TNR): 0.5 is chance whatever the share of
    members, and on a balanced query set it equals the plain accuracy."""
    one_class = len(np.unique(truth)) < 2
    accuracy = skm.accuracy_score if one_class else skm.balanced_accuracy_score
    return {"accuracy": float(accuracy(truth, predicted)),
            "precision": float(skm.precision_score(truth, predicted, zero_division=0)),
            "recall": float(skm.recall_score(truth, predicted, zero_division=0)),
            "f1": float(skm.f1_score(truth, predicted, zero_division=0))}


def auc_of(members: np.ndarray, nonmembers: np.ndarray, axis: int = -1) -> np.ndarray:
    """ROC AUC along `axis` (ties count one half), from the Mann-Whitney U statistic."""
    both = np.concatenate([members, nonmembers], axis=axis)
    ranks = stats.rankdata(both, axis=axis)
    n1, n0 = members.shape[axis], nonmembers.shape[axis]
    u = np.take(ranks, np.arange(n1), axis=axis).sum(axis=axis) - n1 * (n1 + 1) / 2
    return np.asarray(u / (n1 * n0))


def roc(truth: np.ndarray, scores: np.ndarray) -> dict[str, list[float]]:
    """Every corner of the ROC curve (full resolution), rounded to 8 digits."""
    fpr, tpr, _ = skm.roc_curve(truth, scores, drop_intermediate=True)
    return {"roc_fpr": fpr.round(8).tolist(), "roc_tpr": tpr.round(8).tolist()}


def ranking(truth: np.ndarray, scores: np.ndarray) -> tuple[dict[str, float], dict[str, list[float]]]:
    """AUC and the measurable TPRs at low FPR, and the full ROC curve."""
    truth = np.asarray(truth).astype(bool)
    if truth.all() or not truth.any():
        return {}, {}
    mem, non = scores[truth], scores[~truth]
    out = {"auc": float(auc_of(mem, non))}
    for key, alpha in FPR_LEVELS.items():
        if measurable(alpha, len(non)):
            out[key] = float(tpr_at_fpr(mem, non, alpha))
    return out, roc(truth, scores)


def all_metrics(truth: np.ndarray, predicted: np.ndarray,
                scores: np.ndarray) -> tuple[dict[str, float], dict[str, list[float]]]:
    ranked, curves = ranking(truth, scores)
    return {**classification(truth, predicted), **ranked}, curves


def intervals(truth: np.ndarray, scores: np.ndarray, seed: int = BOOTSTRAP_SEED) -> dict[str, list[float]]:
    """Bootstrap CIs ([low, high] at CONFIDENCE) for AUC and each measurable TPR at low FPR."""
    truth = np.asarray(truth).astype(bool)
    mem, non = scores[truth], scores[~truth]
    if len(mem) < 2 or len(non) < 2:
        return {}
    statistics: dict[str, Any] = {"auc": auc_of}
    statistics.update({k: (lambda m, n, axis=-1, a=a: tpr_at_fpr(m, n, a, axis))
                       for k, a in FPR_LEVELS.items() if measurable(a, len(non))})
    out = {}
    for i, (key, fn) in enumerate(statistics.items()):
        res = stats.bootstrap((mem, non), fn, n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                              method="percentile", vectorized=True, batch=200,
                              random_state=np.random.default_rng([seed, i]))
        ci = res.confidence_interval
        out[key] = [round(float(ci.low), 6), round(float(ci.high), 6)]
    return out


def chance_test(truth: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    """One-sided Mann-Whitney U: do members score higher than non-members? (H0: AUC = 0.5)."""
    truth = np.asarray(truth).astype(bool)
    if truth.all() or not truth.any():
        return {}
    p = float(stats.mannwhitneyu(scores[truth], scores[~truth], alternative="greater").pvalue)
    return {"test": "one-sided Mann-Whitney U, H0: AUC = 0.5", "p_value": p, "alpha": CHANCE_ALPHA,
            "distinguishable_from_chance": p < CHANCE_ALPHA}


def statistics(truth: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    """What a report needs beside the metrics: CIs, the chance test, what is not measurable."""
    n0 = int((~np.asarray(truth).astype(bool)).sum())
    missing = [k for k, a in FPR_LEVELS.items() if not measurable(a, n0)]
    note = (f"TPR below FPR 1/{n0} = {1 / max(n0, 1):.2g} is not measurable with {n0} non-members"
            if missing else "")
    resolved = {k: a for k, a in FPR_LEVELS.items() if measurable(a, n0)}
    return {"ci": intervals(truth, scores), "ci_confidence": CONFIDENCE, "ci_method":
            f"stratified percentile bootstrap, {RESAMPLES} resamples (scipy.stats.bootstrap)",
            "chance": chance_test(truth, scores), "not_measurable": missing, "not_measurable_note": note,
            "chance_tpr": {k: chance_tpr(a, n0) for k, a in resolved.items()},
            "fpr_achieved": {k: achieved_fpr(a, n0) for k, a in resolved.items()}}


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold on `scores` with the best balanced accuracy on (shadow) labels."""
    if len(np.unique(labels)) < 2:
        return float(np.median(scores)) if len(scores) else 0.0
    fpr, tpr, thresholds = skm.roc_curve(labels, scores)
    best = int(np.argmax(tpr - fpr))
    return float(thresholds[best]) if np.isfinite(thresholds[best]) else float(np.max(scores))


def pooled(per_query: list[dict[str, list]]) -> tuple[np.ndarray, np.ndarray]:
    """(membership, scores) of several results' `extra.membership.per_query` together: a query set
    large enough for a low FPR when one victim's is not (say so beside any number from it)."""
    truth = np.concatenate([np.asarray(p["member"], bool) for p in per_query])
    scores = np.concatenate([np.asarray([np.nan if s is None else s for s in p["score"]], float)
                             for p in per_query])
    return truth, np.nan_to_num(scores, nan=-np.inf)


def pooled_intervals(per_query: list[dict[str, list]], seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """Bootstrap CIs of the pooled metrics (AUC, each TPR the pool resolves) that respect where the
    queries came from: victims are resampled, then each drawn victim's members and non-members
    (a two-level, clustered bootstrap: pooled queries of one victim are not independent of each
    other). With one victim it is the stratified bootstrap of `intervals`."""
    sets = [pooled([p]) for p in per_query]
    truth, scores = pooled(per_query)
    if truth.all() or not truth.any():
        return {}
    if len(sets) < 2:
        return {"ci": intervals(truth, scores, seed), "ci_method": f"stratified percentile bootstrap, {RESAMPLES} "
                "resamples (one victim)"}
    n0 = int((~truth).sum())
    alphas = {k: a for k, a in FPR_LEVELS.items() if measurable(a, n0)}
    rng = np.random.default_rng([seed, len(sets)])
    drawn: dict[str, list[float]] = {"auc": [], **{k: [] for k in alphas}}
    for _ in range(RESAMPLES):
        mem, non = [], []
        for v in rng.integers(0, len(sets), len(sets)):
            t, s = sets[v]
            mem.append(rng.choice(s[t], int(t.sum())))
            non.append(rng.choice(s[~t], int((~t).sum())))
        m, n = np.concatenate(mem), np.concatenate(non)
        drawn["auc"].append(float(auc_of(m, n)))
        for k, a in alphas.items():
            drawn[k].append(float(tpr_at_fpr(m, n, a)))
    tail = (1 - CONFIDENCE) / 2 * 100
    ci = {k: [round(float(np.percentile(v, tail)), 6), round(float(np.percentile(v, 100 - tail)), 6)]
          for k, v in drawn.items()}
    return {"ci": ci, "ci_method": f"two-level percentile bootstrap: victims, then each victim's members and "
                                   f"non-members, {RESAMPLES} resamples"}
