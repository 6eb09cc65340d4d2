"""Attack families as the verdict states them, and the per-victim numbers each is judged on.

Results whose attacks share a primary metric answer the same question (membership: AUC;
training-data reconstruction: PSNR of matched images; model inversion: attack accuracy), so
the verdict takes the strongest attack of a family as that family's answer. The family comes
from the metric declarations a result carries (`leakage.headlines`), so a new attack joins its
family with no edit here, and an attack with a primary metric of its own is a family of its own.

The numbers are read per unit (one victim of one seeded federation, attacked with one seed):
- membership: the TPR at the lowest FPR every victim's non-members resolve
  (`fedattack.rates`), from each result's scores or ROC curve, with its chance level;
- rates of known counts (images matched, classes judged, members) keep their counts, so that
  victims that all scored the same get the exact binomial interval of the pooled count;
- a metric judged by an evaluation classifier (model inversion) keeps that classifier's
  accuracy and the size of its own test set.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedattack import rates
from fedattack.reports.collect import LoadedResult
from fedattack.reports.leakage import Reading, headlines, merged, reading


@dataclass(frozen=True)
class Family:
    key: str                 # the primary metric that defines the family
    name: str                # as a sentence names it
    rank: tuple[str, ...]    # metrics the strongest attack is chosen by, the first present first
    effect: str              # the metric a defence's effect is stated on


BUILT_IN = {
    "auc": Family("auc", "membership inference", ("auc",), "auc"),
    "psnr_mean": Family("psnr_mean", "training-data reconstruction", ("share_recovered", "psnr_mean"),
                        "share_recovered"),
    "attack_accuracy": Family("attack_accuracy", "model inversion", ("attack_accuracy",), "attack_accuracy"),
    "recovered_20": Family("recovered_20", "image recovery from one round", ("recovered_20",), "recovered_20"),
}
# where a result's trials are recorded, for a rate of known counts: metric -> (path in extra, what)
COUNTS = {"share_recovered": (("reconstruction_match", "pairs"), "matched images"),
          "attack_accuracy": (("inversion", "victim_classes"), "class judgements")}

Unit = Hashable


def unit(r: LoadedResult) -> Unit:
    """What pairs two results: the same victim of the same seed, attacked with the same seed."""
    return (r.run.seed, r.result.victim, r.result.seed)


def units_word(results: list[LoadedResult]) -> str:
    """What an interval's n counts: victims, or victim-seed pairs where runs or attacks had several seeds."""
    return "victims" if len({(r.run.seed, r.result.seed) for r in results}) <= 1 else "victim-seed pairs"


def family_of(r: LoadedResult) -> Family:
    declared = merged([r.result])
    keys = headlines(r.result.attack, set(declared) | set(r.result.metrics), declared)
    key = keys[0] if keys else r.result.attack
    return BUILT_IN.get(key) or Family(key, r.result.attack, (key,), key)


def values(results: list[LoadedResult], key: str) -> dict[Unit, float]:
    out = {}
    for r in results:
        v = r.result.metrics.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[unit(r)] = float(v)
    return out


def trials(results: list[LoadedResult], key: str) -> tuple[dict[Unit, int], str] | None:
    """Each unit's count behind a rate (None where any result does not record it)."""
    if key not in COUNTS:
        return None
    (outer, inner), what = COUNTS[key]
    out = {}
    for r in results:
        found = (r.result.extra.get(outer) or {}).get(inner) if isinstance(r.result.extra.get(outer), dict) else None
        if not isinstance(found, list):
            return None
        out[unit(r)] = len(found)
    return out, what


def nonmembers(r: LoadedResult) -> int | None:
    info = r.result.extra.get("membership")
    if isinstance(info, dict) and isinstance(info.get("nonmembers"), int) and info["nonmembers"] > 0:
        return int(info["nonmembers"])
    return None


@dataclass
class Rates:
    """TPR at one FPR for each unit, with the chance level and the member count behind it."""

    alpha: float
    tpr: dict[Unit, float]
    chance: dict[Unit, float]
    members: dict[Unit, int]

    def reading(self) -> Reading:
        label = f"TPR at {rates.percent(self.alpha)} FPR"
        return Reading(f"tpr@{self.alpha:g}", label, "%", 100.0, "higher", 2, (0.0, 1.0))

    @property
    def mean_chance(self) -> float:
        return float(np.mean(list(self.chance.values()))) if self.chance else math.nan


def membership_rates(results: list[LoadedResult]) -> Rates | None:
    """TPR at the lowest FPR of the ladder that every result's non-members resolve."""
    counts = [nonmembers(r) for r in results]
    if not results or any(c is None for c in counts):
        return None
    alpha = rates.lowest_supported([c for c in counts if c is not None])
    if alpha is None:
        return None
    out = Rates(alpha, {}, {}, {})
    for r, n0 in zip(results, counts):
        assert n0 is not None
        tpr = _tpr(r, alpha)
        if math.isfinite(tpr):
            out.tpr[unit(r)] = tpr
            out.chance[unit(r)] = rates.chance_tpr(alpha, n0)
            out.members[unit(r)] = int(r.result.extra["membership"].get("members") or 0)
    return out if out.tpr else None


def _tpr(r: LoadedResult, alpha: float) -> float:
    """From the per-query scores where the result kept them (the attack's own estimator), else
    from its ROC curve."""
    per_query = r.result.extra["membership"].get("per_query")
    if isinstance(per_query, dict) and per_query.get("score") and per_query.get("member"):
        scores = np.asarray([-np.inf if s is None else s for s in per_query["score"]], float)
        member = np.asarray(per_query["member"], bool)
        if member.any() and (~member).any():
            return float(rates.tpr_at_fpr(scores[member], scores[~member], alpha))
    curve = r.result.curves
    return rates.tpr_from_roc(curve.get("roc_fpr", []), curve.get("roc_tpr", []), alpha)


def inversion_chance(results: list[LoadedResult]) -> float | None:
    """An evaluation classifier that guesses is right once in as many classes as it labels."""
    sizes = {len(r.result.extra["inversion"]["eval_labels"]) for r in results
             if isinstance((r.result.extra.get("inversion") or {}).get("eval_labels"), list)}
    return 1.0 / sizes.pop() if len(sizes) == 1 and min(sizes) > 0 else None


@dataclass(frozen=True)
class Judge:
    """The evaluation classifier behind a metric: its accuracy on its own held-out images."""

    accuracy: float
    test: int

    def words(self) -> str:
        right = round(self.accuracy * self.test)
        return f"judged by a classifier right on {right} of its {self.test} held-out images"


def judge(results: list[LoadedResult]) -> Judge | None:
    """The evaluation classifier's accuracy and test size, as each result's attack recorded them."""
    accs = [r.result.metrics.get("eval_classifier_accuracy") for r in results]
    sizes = [own.get("eval_classifier_test") if isinstance(own := r.result.extra.get(r.result.attack), dict) else None
             for r in results]
    if not results or not all(isinstance(a, (int, float)) for a in accs) or not all(isinstance(s, int) for s in sizes):
        return None
    return Judge(float(np.mean([float(a) for a in accs if a is not None])), min(int(s) for s in sizes if s is not None))


def metric_reading(results: list[LoadedResult], key: str) -> Reading:
    return reading(key, merged(r.result for r in results))


def describe(extra: Any) -> str:
    """A threat model's first clause of what it observes: 'the victim's channel'."""
    observes = str((extra or {}).get("observes") or "") if isinstance(extra, dict) else ""
    return observes.split(",")[0].split(" (")[0].strip()
