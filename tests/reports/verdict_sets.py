"""Random result sets for the verdict's property test: any mix a user's folder could hold.

Federations of one to three methods (a defended twin now and then, an active server now and
then, one or two seeds), threat models realistic and upper bound, the three built-in attack
families with one or two attacks and reconstructions each, zero to six victims, each victim
applicable or not, and values drawn to stress the statistics: spread, ties, all equal, at the
bounds, n = 1; now and then evaluate's honest strategy selection (`selected`). Numbers are made
the way the attacks make them (membership metrics from
per-query scores through the attacks' own functions), so the verdict reads realistic files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedattack.attacks.data_reconstruction.inversion_family import UPDATE_INVERSION_METRICS
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS
from fedattack.attacks.membership.metrics import auc_of
from fedattack.attacks.model_inversion.inversion import INVERSION_METRICS
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.results import AttackResult, metric_table

NAMES = ("alpha", "bravo", "charlie", "delta")  # no name is part of another
THREATS = {"eavesdropper": ("the victim's channel, both directions", False),
           "server": ("every uplink of every client and round", False),
           "oracle": ("every model the victim held, private state included", True)}
FAMILIES = {"membership": (("membership", "lira"), metric_table(MEMBERSHIP_METRICS)),
            "reconstruction": (("update-inversion",), metric_table(UPDATE_INVERSION_METRICS)),
            "inversion": (("inversion",), metric_table(INVERSION_METRICS))}
DP = [{"name": "dp-fedavg", "settings": {"noise_multiplier": 0.01}}]
ACTIVE = {"name": "trap-weights", "settings": {"bins": 8}}


def runs(rng: np.random.Generator) -> list[RunInfo]:
    out = []
    for method in rng.choice(NAMES, int(rng.integers(1, 4)), replace=False):
        defended = [[], DP] if rng.random() < 0.3 else [[]]
        active = [None, ACTIVE] if rng.random() < 0.2 else [None]
        for defences in defended:
            for adversary in active:
                for seed in range(int(rng.integers(1, 3))):
                    out.append(RunInfo(method=str(method), dataset="digits", partition="iid", seed=seed,
                                       utility={"mean": float(rng.uniform(50, 99))}, defences=list(defences),
                                       adversary=adversary, path=Path(f"/nowhere/{method}{len(out)}")))
    return out


def draw(rng: np.random.Generator, mode: str, low: float, high: float) -> float:
    if mode == "equal":
        return low
    if mode == "ties":
        return float(rng.choice([low, (low + high) / 2]))
    if mode == "bound":
        return high
    return float(rng.uniform(low, high))


def membership(rng: np.random.Generator, mode: str) -> tuple[dict[str, float], dict[str, Any]]:
    members, nonmembers = int(rng.integers(1, 30)), int(rng.choice([5, 9, 19, 120, 400]))
    truth = np.r_[np.ones(members, bool), np.zeros(nonmembers, bool)]
    shift = {"equal": 0.0, "ties": 0.0, "bound": 6.0}.get(mode, float(rng.normal(0, 1)))
    scores = rng.normal(0, 1, len(truth)) + shift * truth
    if mode == "ties":
        scores = np.round(scores)
    metrics = {"auc": float(auc_of(scores[truth], scores[~truth]))}  # the TPRs: read from the scores
    extra = {"membership": {"members": members, "nonmembers": nonmembers, "fpr_resolution": 1 / nonmembers,
                            "per_query": {"score": scores.tolist(), "member": truth.astype(int).tolist()}}}
    return metrics, {"extra": extra, "baselines": {"loss-threshold": {"auc": draw(rng, mode, 0.3, 0.7)}}}


def reconstruction(rng: np.random.Generator, mode: str) -> tuple[dict[str, float], dict[str, Any]]:
    pairs = int(rng.integers(1, 20))
    share = round(draw(rng, mode, 0.0, 1.0) * pairs) / pairs
    return ({"share_recovered": share, "psnr_mean": draw(rng, mode, 8, 40)},
            {"extra": {"reconstruction_match": {"pairs": [[i, i] for i in range(pairs)]}}})


def inversion(rng: np.random.Generator, mode: str) -> tuple[dict[str, float], dict[str, Any]]:
    """Now and then a result from before the class-mix measure (no `class_mix_excess`)."""
    classes = int(rng.integers(1, 4))
    acc = round(draw(rng, mode, 0.0, 1.0) * classes) / classes
    metrics = {"attack_accuracy": acc, "psnr": draw(rng, mode, 8, 14), "eval_classifier_accuracy": 0.86}
    if rng.random() < 0.8:
        metrics["class_mix_excess"] = draw(rng, mode, -0.3, 0.6)
    return (metrics, {"extra": {"inversion": {"victim_classes": list(range(classes)), "eval_labels": list(range(10)),
                                              "eval_classifier_test": 21}}})


MAKERS = {"membership": membership, "reconstruction": reconstruction, "inversion": inversion}


def result_set(seed: int) -> list[LoadedResult]:
    rng = np.random.default_rng(seed)
    threats = [t for t in THREATS if rng.random() < 0.6] or ["eavesdropper"]
    families = [f for f in FAMILIES if rng.random() < 0.6] or ["membership"]
    victims = list(range(int(rng.integers(0, 7))))
    out = []
    for run in runs(rng):
        for threat in threats:
            observes, bound = THREATS[threat]
            for family in families:
                attacks, declared = FAMILIES[family]
                applicable = float(rng.choice([1.0, 1.0, 0.5, 0.0]))
                mode = str(rng.choice(["spread", "ties", "equal", "bound"]))
                for attack in attacks[:int(rng.integers(1, len(attacks) + 1))]:
                    for recon in ("decoded", "fitted", "selected")[:int(rng.integers(1, 4))]:
                        for victim in victims:
                            out.append(one(rng, run, threat, observes, bound, family, attack, recon, victim,
                                           declared, rng.random() < applicable, mode))
    return out


def one(rng: np.random.Generator, run: RunInfo, threat: str, observes: str, bound: bool, family: str, attack: str,
        recon: str, victim: int, declared: Any, applicable: bool, mode: str) -> LoadedResult:
    fields: dict[str, Any] = {"extra": {}}
    metrics: dict[str, float] = {}
    if applicable:
        metrics, fields = MAKERS[family](rng, mode)
    extra = {**fields.get("extra", {}), "threat_model": {"name": threat, "observes": observes, "upper_bound": bound}}
    if recon == "selected":  # evaluate's honest choice of strategy (attacks/evaluation/selection.py)
        extra["selection"] = {"chosen": str(rng.choice(["decoded", "fitted"])), "rule": "leave one victim out"}
    result = AttackResult(attack=attack, threat_model=threat, run={"method": run.method}, victim=victim,
                          reconstruction=recon, metrics=metrics, curves=fields.get("curves", {}),
                          baselines=fields.get("baselines", {}), metric_info=declared, extra=extra,
                          applicable=applicable, upper_bound=bound, note="" if applicable else "saw nothing")
    return LoadedResult(result, Path(f"/nowhere/{attack}-{threat}-{victim}.json"), run)
