"""Utility metrics: how well each client's deployed model does on its own local test set.

The definitions follow the WAFFLe paper's Tables 1 and 2: the mean over clients of local test
accuracy, and for grouped partitions the majority mean, minority mean, their gap, and the
variance of accuracy across all clients (in percent squared, as the paper prints it).
"""

from __future__ import annotations

import numpy as np
import torch


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    if labels.numel() == 0:
        return float("nan")
    return float((logits.argmax(1) == labels).float().mean())


def utility_summary(accs: list[float], groups: list[str]) -> dict[str, float]:
    """Mean, std and variance over clients (in %), and per-group means with the gap."""
    a = np.asarray(accs, dtype=float) * 100.0
    a = a[~np.isnan(a)] if np.isnan(a).any() else a
    out = {"mean": float(a.mean()), "std": float(a.std()), "variance": float(a.var())}
    names = sorted(set(groups))
    if {"majority", "minority"} <= set(names):
        arr = np.asarray(accs, dtype=float) * 100.0
        g = np.asarray(groups)
        out["majority"] = float(np.nanmean(arr[g == "majority"]))
        out["minority"] = float(np.nanmean(arr[g == "minority"]))
        out["gap"] = out["majority"] - out["minority"]
    elif len(names) > 1:
        arr = np.asarray(accs, dtype=float) * 100.0
        g = np.asarray(groups)
        for name in names:
            out[f"group:{name}"] = float(np.nanmean(arr[g == name]))
    return out
