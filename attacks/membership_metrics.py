"""Membership-inference metrics (scikit-learn): the seeds' accuracy/precision/recall/F1, ROC AUC,
TPR at low FPR (Carlini et al. 2022's point that averages hide the records that leak), and the
ROC curve. Scores are "more likely a member" when higher; predictions are 0/1.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

ROC_POINTS = 201  # the curve is stored at this many FPR grid points (JSON stays small)


def classification(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    return {"accuracy": float(skm.accuracy_score(truth, predicted)),
            "precision": float(skm.precision_score(truth, predicted, zero_division=0)),
            "recall": float(skm.recall_score(truth, predicted, zero_division=0)),
            "f1": float(skm.f1_score(truth, predicted, zero_division=0))}


def tpr_at(fpr: np.ndarray, tpr: np.ndarray, limit: float) -> float:
    """The highest TPR reached at FPR <= limit."""
    ok = fpr <= limit + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


def ranking(truth: np.ndarray, scores: np.ndarray) -> tuple[dict[str, float], dict[str, list[float]]]:
    """AUC, TPR at 1% and 0.1% FPR, and the ROC curve on a fixed FPR grid (best TPR at FPR <= x)."""
    if len(np.unique(truth)) < 2:
        return {}, {}
    fpr, tpr, _ = skm.roc_curve(truth, scores)
    grid = np.linspace(0.0, 1.0, ROC_POINTS)
    curve = np.array([tpr_at(fpr, tpr, g) for g in grid])
    out = {"auc": float(skm.roc_auc_score(truth, scores)), "tpr_at_1fpr": tpr_at(fpr, tpr, 0.01),
           "tpr_at_01fpr": tpr_at(fpr, tpr, 0.001)}
    return out, {"roc_fpr": grid.round(6).tolist(), "roc_tpr": curve.round(6).tolist()}


def all_metrics(truth: np.ndarray, predicted: np.ndarray,
                scores: np.ndarray) -> tuple[dict[str, float], dict[str, list[float]]]:
    ranked, curves = ranking(truth, scores)
    return {**classification(truth, predicted), **ranked}, curves


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold on `scores` with the best balanced accuracy on (shadow) labels."""
    if len(np.unique(labels)) < 2:
        return float(np.median(scores)) if len(scores) else 0.0
    fpr, tpr, thresholds = skm.roc_curve(labels, scores)
    best = int(np.argmax(tpr - fpr))
    return float(thresholds[best]) if np.isfinite(thresholds[best]) else float(np.max(scores))
