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
    """Mean, std and variance over clients (in %), per-group means with the gap, and how many
    clients were measured (`clients_measured`).

    A client without local test images has no accuracy (NaN): it is left out of every figure
    here, and counted out in `clients_measured`, rather than turning the mean into NaN (and numpy
    into warnings) or counting as 0%. With no client measured there is no mean at all:
    `fedattack.federation.utility` then measures the dataset's test split instead."""
    a = np.asarray(accs, dtype=float) * 100.0
    measured = ~np.isnan(a)
    out: dict[str, float] = {"clients_measured": int(measured.sum())}
    if not measured.any():
        return out
    kept, g = a[measured], np.asarray(groups)[measured]
    out.update(mean=float(kept.mean()), std=float(kept.std()), variance=float(kept.var()))
    names = sorted(set(groups))
    if {"majority", "minority"} <= set(names):
        for name in ("majority", "minority"):
            if (g == name).any():
                out[name] = float(kept[g == name].mean())
        if "majority" in out and "minority" in out:
            out["gap"] = out["majority"] - out["minority"]
    elif len(names) > 1:
        for name in names:
            if (g == name).any():
                out[f"group:{name}"] = float(kept[g == name].mean())
    return out


def describe_utility(utility: dict[str, float], clients: int) -> str:
    """The utility as one phrase that says what was measured: the mean local test accuracy, over
    how many clients when some hold no test images, or the test split's when none do."""
    measured = int(utility.get("clients_measured", clients))
    if "mean" in utility:
        extra = "".join(f", {k} {utility[k]:.2f}" for k in ("majority", "minority", "gap") if k in utility)
        over = f" over the {measured:,} of {clients:,} clients that hold test images" if measured < clients else ""
        return f"mean local test accuracy {utility['mean']:.2f}%{extra}{over}"
    said = "mean local test accuracy not measured: no client holds local test images"
    if "test_split" in utility:
        said += (f"; on the dataset's test split, which no client holds, the clients' deployed models classify "
                 f"{utility['test_split']:.2f}% of {int(utility['test_split_images']):,} images correctly")
    return said
