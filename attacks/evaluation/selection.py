"""The strongest reconstruction strategy, chosen honestly (`--reconstruction strongest`, the default).

A method that keeps part of its model off the wire (WAFFLe's factor selection, FedPer's head,
a personal model) can be rebuilt several ways, and which guess leaks most differs by method,
attack and recipe (`auto`'s fixed choice understated WAFFLe's membership leakage). So every
applicable strategy is attacked, and the verdict takes the strongest; but the maximum of several
noisy measurements overstates each one's value, so a victim's strategy is never chosen on that
victim: it is the strategy whose primary metric (by the attack's declared direction of leakage)
is best on average over the *other* victims, leave one victim out. The victim's "selected"
result is then that strategy's result on it, measured on data the choice never saw; over the
victims, the selected results estimate what an adversary that picks its strategy on past
victims gets from the next one.

A selected result is a copy of the chosen strategy's (metrics, curves, artifacts, the
reconstruction's details) under reconstruction `selected`, with `extra.selection` saying what
was chosen, on which victims and by which numbers. With one victim there is nothing to choose on:
the selected result is not applicable, and says so.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from fedattack.attacks.evaluation.upper_bound import leak_value
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS
from fedattack.leave_one_out import mean_without
from fedattack.registry import UserError
from fedattack.results import AttackResult, Metric

SELECTED = "selected"
RULE = ("leave one victim out: each victim's strategy is the one whose primary metric is best on "
        "average over the other victims")


def select_strongest(paths: list[Path], out: Path) -> list[Path]:
    """Write one selected result per (attack, threat model, victim) of every group attacked with
    `strongest` and more than one strategy; returns the files written."""
    groups: dict[tuple[str, str], dict[int, dict[str, AttackResult]]] = {}
    for path in paths:
        r = AttackResult.load(path)
        if r.reconstruction == SELECTED or r.settings.get("reconstruction_request") != "strongest":
            continue
        groups.setdefault((r.attack, r.threat_model), {}).setdefault(r.victim, {})[r.reconstruction] = r
    written = []
    for (attack, tm), by_victim in sorted(groups.items()):
        strategies = {s for results in by_victim.values() for s, r in results.items() if r.applicable}
        if len(strategies) < 2:
            continue
        for victim in sorted(by_victim):
            chosen = selected(victim, by_victim, strategies)
            path = out / f"{attack}-{tm}-{SELECTED}-victim{victim}.json"
            written.append(chosen.save(path))
    return written


def selected(victim: int, by_victim: dict[int, dict[str, AttackResult]], strategies: set[str]) -> AttackResult:
    """The victim's selected result: the strategy best on the other victims, its result on this one."""
    mine = by_victim[victim]
    template = next(iter(mine.values()))
    primary = primary_metric(template)
    others = {v: rs for v, rs in by_victim.items() if v != victim}
    scores = {s: mean_without(leaks(by_victim, s, primary), victim) for s in strategies}
    usable = {s: v for s, v in scores.items() if math.isfinite(v) and s in mine and mine[s].applicable}
    info: dict[str, Any] = {"rule": RULE, "metric": primary.key if primary else None,
                            "chosen_on_victims": sorted(others), "mean_on_other_victims": _finite(scores),
                            "candidates": sorted(strategies)}
    if not usable:
        why = ("the strongest strategy is chosen on the other victims, and there are none: evaluate two or more "
               "victims" if not others else "no strategy gave this victim and the others an applicable result")
        return replace(template, reconstruction=SELECTED, applicable=False, note=why, metrics={}, curves={},
                       baselines={}, artifacts={}, extra={**template.extra, "selection": info})
    chosen = max(usable, key=lambda s: (usable[s], -rank(s)))
    base = mine[chosen]
    settings = {**base.settings, "reconstruction": SELECTED, "selected_strategy": chosen}
    info["chosen"] = chosen
    info["on_this_victim"] = {s: r.metrics.get(primary.key) if primary else None for s, r in mine.items()}
    return replace(base, reconstruction=SELECTED, settings=settings, extra={**base.extra, "selection": info})


def primary_metric(result: AttackResult) -> Metric | None:
    declared = result.declared()
    return next((m for m in declared.values() if m.primary), next(iter(declared.values()), None))


def leaks(by_victim: dict[int, dict[str, AttackResult]], strategy: str, metric: Metric | None) -> dict[int, float]:
    """Per victim, the strategy's applicable result's metric, signed so that larger leaks more."""
    if metric is None:
        return {}
    return {v: leak_value(rs[strategy], metric) for v, rs in by_victim.items()
            if strategy in rs and rs[strategy].applicable}


def rank(strategy: str) -> int:
    """The strategy's registered rank (ties go to the lower rank, as `auto` would choose)."""
    try:
        return int(RECONSTRUCTIONS.get(strategy).rank)
    except UserError:  # a strategy no longer registered: ranked last
        return 10**6


def _finite(scores: dict[str, float]) -> dict[str, float | None]:
    return {s: (round(v, 6) if math.isfinite(v) else None) for s, v in sorted(scores.items())}
