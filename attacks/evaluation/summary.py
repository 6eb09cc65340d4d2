"""`summary.json`: mean, standard deviation and 95% interval over victims of every attack's metrics.

One group per (attack, threat model, reconstruction); victims whose result is not applicable
are counted but not averaged. Each group names its headline metrics, as the attack declared
them in its results (`AttackResult.metric_info`). The standard deviation is the population one
(numpy's default, ddof=0). Every mean carries its interval (`fedattack.intervals`: BCa bootstrap
over victims; null with fewer than two; a note where fewer than `FEW` victims make it about
their range), and so do the baselines' means and the metrics of the queries pooled over victims
(a two-level bootstrap over victims and their queries, `membership_metrics.pooled_intervals`).
Its schema differs from a result's, so reports never mistake it for one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from fedattack.atomic import write_json
from fedattack.attacks.membership.metrics import FPR_LEVELS, pooled, pooled_intervals, ranking
from fedattack.intervals import mean_interval
from fedattack.rates import chance_tpr, measurable
from fedattack.results import AttackResult

SUMMARY_SCHEMA = "fedattack.summary/1"
FEW = 5  # fewer victims than this: the interval is about their range, and says so


def summarize(results: list[AttackResult]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[AttackResult]] = {}
    for r in results:
        groups.setdefault((r.attack, r.threat_model, r.reconstruction), []).append(r)
    return [group_summary(key, rs) for key, rs in sorted(groups.items())]


def group_summary(key: tuple[str, str, str], results: list[AttackResult]) -> dict[str, Any]:
    ok = [r for r in results if r.applicable]
    metrics = stats([r.metrics for r in ok])
    baselines = {b: stats([r.baselines[b] for r in ok if b in r.baselines])
                 for b in sorted({b for r in ok for b in r.baselines})}
    return {"attack": key[0], "threat_model": key[1], "reconstruction": key[2],
            "victims": [r.victim for r in results], "applicable": len(ok),
            "upper_bound": any(r.upper_bound for r in results), "metrics": metrics,
            "baselines": baselines, "notes": sorted({r.note for r in results if r.note}),
            "headline": headline(results), **membership_queries(ok)}


def membership_queries(results: list[AttackResult]) -> dict[str, Any]:
    """Membership groups: each victim's member and non-member counts, and the metrics of every
    victim's queries pooled (where one victim's non-members cannot resolve a low FPR, the pool
    may; a number from it is about the pool, and says so by where it sits)."""
    infos = [r.extra["membership"] for r in results if "per_query" in r.extra.get("membership", {})]
    if not infos:
        return {}
    truth, scores = pooled([i["per_query"] for i in infos])
    metrics, _ = ranking(truth, scores)
    return {"queries": {"members": [i["members"] for i in infos], "nonmembers": [i["nonmembers"] for i in infos],
                        "pooled": {"victims": len(infos), "members": int(truth.sum()),
                                   "nonmembers": int((~truth).sum()), "metrics": metrics,
                                   "chance_tpr": chance_levels(int((~truth).sum())),
                                   **pooled_intervals([i["per_query"] for i in infos])}}}


def chance_levels(nonmembers: int) -> dict[str, float]:
    """What a guessing scorer reaches at each TPR the pool resolves (`fedattack.rates`)."""
    return {k: chance_tpr(a, nonmembers) for k, a in FPR_LEVELS.items() if measurable(a, nonmembers)}


def headline(results: list[AttackResult]) -> list[str]:
    """The headline metric keys the attack declared (none for results written before declarations)."""
    declared = next((r.declared() for r in results if r.metric_info), {})
    return [k for k, m in declared.items() if m.headline]


def stats(rows: list[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per metric: mean, std, n and the mean's interval over victims (`interval`)."""
    out = {}
    for name in sorted({k for row in rows for k in row}):
        values = [float(row[name]) for row in rows if name in row and math.isfinite(float(row[name]))]
        if values:
            out[name] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values),
                         "interval": interval(values)}
    return out


def interval(values: list[float]) -> dict[str, Any]:
    s = mean_interval(values)
    out = {k: v for k, v in s.to_json().items() if k in ("low", "high", "confidence", "method")}
    if s.has_interval and s.n < FEW:
        out["note"] = f"from {s.n} victims: a 95% interval from so few is about their range"
    if s.degenerate:
        out["note"] = "every victim gave the same value: no spread to give an interval"
    return out


def write_summary(path: Path, result_files: list[Path]) -> Path:
    results = [AttackResult.load(p) for p in result_files]
    data = {"schema": SUMMARY_SCHEMA, "results": [p.name for p in result_files],
            "groups": summarize(results)}
    return write_json(path, data)
