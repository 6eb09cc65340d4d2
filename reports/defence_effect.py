"""What a defence changes: a defended federation against its undefended twin, both audited.

A defended run is a federation of its own (`identity.py`), so its claims sit beside its twin's:
the same method, settings, data and adversary without the defence. For each threat model and
attack family both were audited under, the strongest attack on each side is compared on the
family's effect metric (the share of images recovered, membership AUC, inversion accuracy):
the difference with its interval, paired by victim and seed where both attacked the same
victims, and beside it what the defence cost in mean local test accuracy, paired by seed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable

from fedattack.intervals import Difference, difference_interval
from fedattack.reports import numbers
from fedattack.reports.claims import Claim, estimate
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.reports.families import metric_reading, units_word, values
from fedattack.reports.identity import accounting, defence_label
from fedattack.reports.leakage import Reading

WHAT = {"share_recovered": "the share of a victim's training images recovered above 20 dB",
        "auc": "the membership AUC", "attack_accuracy": "model inversion's share of class images labelled right"}
UTILITY = Reading("mean", "mean local test accuracy", "%", 1.0, "higher", 1, (0.0, 100.0))


def twin_key(run: RunInfo) -> tuple[str, ...]:
    return (run.dataset, run.partition, run.undefended, str(run.adversary))


def effects(claims: list[Claim], results: list[LoadedResult]) -> list[str]:
    """One sentence per (defended federation, threat model, family) whose twin was audited too."""
    runs: dict[tuple[str, str], list[RunInfo]] = defaultdict(list)
    for r in results:
        if r.run not in runs[(f"{r.run.dataset} ({r.run.partition})", r.run.federation)]:
            runs[(f"{r.run.dataset} ({r.run.partition})", r.run.federation)].append(r.run)
    by_key = {(c.data, c.federation, c.adversary, c.threat, c.family.key): c for c in claims}
    out = []
    for c in claims:
        fed_runs = runs[(c.data, c.federation)]
        if not fed_runs or not fed_runs[0].defences or c.chosen is None:
            continue
        twin = by_key.get((c.data, fed_runs[0].undefended, c.adversary, c.threat, c.family.key))
        twin_runs = runs.get((c.data, fed_runs[0].undefended), [])
        if twin is not None and twin.chosen is not None:
            out.append(sentence(c, twin, fed_runs, twin_runs))
    return out


def sentence(defended: Claim, twin: Claim, runs: list[RunInfo], twin_runs: list[RunInfo]) -> str:
    """'dp-fedavg(noise_multiplier=0.01) lowers ... from 61% [..] to 0% [..] (...); difference ...'."""
    assert defended.chosen is not None and twin.chosen is not None
    key = defended.family.effect
    mine, theirs = values(defended.chosen.results, key), values(twin.chosen.results, key)
    if not mine or not theirs:
        return ""
    m = metric_reading(defended.chosen.results, key)
    d = difference_interval(mine, theirs)
    units = units_word(defended.chosen.results + twin.chosen.results)
    before = numbers.shown(estimate(twin.chosen.results, key), m, units)
    after = numbers.shown(estimate(defended.chosen.results, key), m, units)
    claim = accounting(runs[0].defences)
    paired = ", paired" if d.paired else ", unpaired"
    return (f"**{defence_label(runs[0].defences)}** on {twin.federation} ({defended.data}), "
            f"{defended.threat}{', an upper bound' if defended.upper_bound else ''}: {verb(d, m)} "
            f"{WHAT.get(key, defended.family.name + chr(39) + 's ' + m.label)} from {before} to {after}; difference "
            f"{numbers.shown(d.interval, m, units + paired, signed=True, against=(0.0,))}, "
            f"at a cost of {cost(runs, twin_runs)}" + (f"; {claim}" if claim else "") + ".")


def verb(d: Difference, m: Reading) -> str:
    i = d.interval
    if not i.has_interval:
        return "changes (by how much cannot be told from one victim)"
    if i.contains(0.0):
        return "does not detectably change"
    lowers = i.below(0.0) if m.leak != "lower" else i.above(0.0)
    return "lowers" if lowers else "raises"


def cost(runs: list[RunInfo], twin_runs: list[RunInfo]) -> str:
    """The defence's change in mean local test accuracy, paired by seed: '-0.1 pp [...] (3 seeds)'."""
    mine, theirs = accuracy(runs), accuracy(twin_runs)
    if not mine or not theirs:
        return "an accuracy not recorded"
    d = difference_interval(mine, theirs)
    units = "seeds, paired" if d.paired else "runs, unpaired"
    change = numbers.shown(d.interval, UTILITY, signed=True, note="none", against=(0.0,))
    return (f"{change} of {UTILITY.label}, "
            f"{_mean(theirs):.1f}% to {_mean(mine):.1f}% ({numbers.n_note(d.interval, units)})")


def accuracy(runs: list[RunInfo]) -> dict[Hashable, float]:
    return {r.seed: r.utility["mean"] for r in runs if math.isfinite(r.utility.get("mean", math.nan))}


def _mean(x: dict[Hashable, float]) -> float:
    return sum(x.values()) / len(x)
