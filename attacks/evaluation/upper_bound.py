"""An upper bound that is one: the attack on every model the victim held, the strongest kept.

An upper-bound threat model (the oracle) hands the adversary several models the victim held
(`View.held`: its deployed model, its local model after training). Which one leaks most
depends on the method and the attack (a FedAvg client's freshly trained uplink leaks more than
the averaged model it deploys; a personalised model may leak more than its shared part), and
the bound must hold whichever it is. So the attack runs on each, and the one result keeps, per
metric, the value of the model that leaks most by the metric's declared direction, and says in
`extra.upper_bound` which model gave which metric and every model's own metrics. Curves, the
per-query scores and intervals are those of the model best on the primary metric.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fedattack.attacks.base import Adversary, Attack, AttackCall, ResultContext
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.results import AttackResult, Metric


def attack_strongest(attack: Attack, adv: Adversary, truth: GroundTruth, seed: int, path: Path,
                     ctx: ResultContext) -> AttackResult:
    """`attack` on the adversary's model, or, for an upper bound, on each held model, combined."""
    named = held_calls(adv, truth, path, ctx)
    return combine({name: attack(c.adv, c.truth, seed, c.path, c.context) for name, c in named})


def held_calls(adv: Adversary, truth: GroundTruth, path: Path, ctx: ResultContext) -> list[tuple[str, AttackCall]]:
    """The attack's calls: one on the adversary's model, or, for an upper bound, one per model
    the victim held (each rebuilt by the adversary's strategy, its artifacts named after it)."""
    if len(adv.view.held) < 2:
        return [("", AttackCall(adv, truth, path, ctx))]
    calls = []
    for name, params in adv.view.held.items():
        obs = replace(adv.obs, deployed=params)
        held_adv = replace(adv, obs=obs, model=adv.reconstructor(obs, key=0))
        artifacts = path.with_name(f"{path.stem}-{name.split(' ')[0]}{path.suffix}")
        calls.append((name, AttackCall(held_adv, truth, artifacts, ctx)))
    return calls


def combine(results: dict[str, AttackResult]) -> AttackResult:
    """The one result of `held_calls`' calls: the lone call's, or the strongest of the held models'."""
    return results[""] if "" in results else strongest(results)


def strongest(results: dict[str, AttackResult]) -> AttackResult:
    """One result: per metric the leakiest model's value, the rest from the best on the primary."""
    applicable = {n: r for n, r in results.items() if r.applicable}
    if not applicable:
        return next(iter(results.values()))
    declared = next(iter(applicable.values())).declared()
    primary = next((m for m in declared.values() if m.primary), next(iter(declared.values()), None))
    lead = max(applicable, key=lambda n: leak_value(applicable[n], primary)) if primary else next(iter(applicable))
    metrics: dict[str, float] = {}
    best_by: dict[str, str] = {}
    for key in {k for r in applicable.values() for k in r.metrics}:
        metric = declared.get(key, Metric(key=key, label=key))
        having = [n for n in applicable if key in applicable[n].metrics]
        best_by[key] = (lead if metric.leak == "none" and lead in having
                        else max(having, key=lambda n: leak_value(applicable[n], metric)))
        metrics[key] = applicable[best_by[key]].metrics[key]
    info: dict[str, Any] = {"rule": "per metric, the model the victim held that leaks most",
                            "best_by_metric": dict(sorted(best_by.items())),
                            "primary_from": lead,
                            "per_model": {n: r.metrics for n, r in applicable.items()},
                            "seconds_per_model": {n: r.seconds for n, r in applicable.items()}}
    base = applicable[lead]
    return replace(base, metrics=metrics, seconds=round(sum(r.seconds for r in applicable.values()), 3),
                   extra={**base.extra, "upper_bound": info})


def leak_value(result: AttackResult, metric: Metric) -> float:
    """The metric's value signed so that larger means more leakage (missing: least)."""
    value = result.metrics.get(metric.key)
    if value is None or value != value:
        return float("-inf")
    return -value if metric.leak == "lower" else value
