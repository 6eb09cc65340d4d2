"""The comparison between methods: which leaks more, under which threat model, by how much.

It follows the absolute verdict (`claims.py`) where a report holds several federations. For each
(dataset, partition, training setting, attack, threat model) the methods are ranked by leakage
on the attack's headline metric, each with a 95% bootstrap interval over victims and seeds
(`fedattack.intervals`), and compared with a reference method (FedAvg unless told otherwise).
Which metric is the headline, which direction means more leakage and what chance is come from
the metric declarations a result carries (`leakage.py`). A method attacked through a different
reconstruction than the reference (WAFFLe's inferred factors against FedAvg's uplink) is still
compared with it: the reconstruction is how the adversary got at that method's model.

Each entry lands in exactly one category (`category`), decided by its difference to the
reference alone: the reference itself, leaks more, leaks less, cannot be told apart, or
undecided (no interval on one side), or alone (no reference in its group). Whether a number
holds chance is a separate statement about that number (`flags`), so "leaks less than fedavg"
and "holds chance" can both be true and are never merged into a third verdict.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from fedattack.intervals import (
    Difference,
    Interval,
    difference_interval,
)
from fedattack.registry import UserError
from fedattack.reports.aggregate import threat_label
from fedattack.reports.claims import estimate
from fedattack.reports.collect import LoadedResult, without_variant
from fedattack.reports.families import unit, units_word
from fedattack.reports.leakage import Reading, headlines, merged, reading
from fedattack.suggest import did_you_mean

REFERENCE = "fedavg"
CATEGORIES = ("reference", "more", "less", "same", "undecided", "alone")


@dataclass
class Entry:
    """One method's numbers in one comparison group (stored units, not display units).

    A method attacked through two reconstructions (say the uplink and inferred factors) is two
    entries; `name` then carries the reconstruction."""

    method: str
    reconstruction: str
    name: str
    values: dict[str, dict[Hashable, float]]
    stats: dict[str, Interval] = field(default_factory=dict)
    resolution: float | None = None  # worst FPR resolution of its membership audits, if recorded
    diff: Difference | None = None
    against: str | None = None  # the reference entry `diff` is taken to
    flags: list[str] = field(default_factory=list)

    def measurable(self, metric: Reading) -> bool:
        need = metric.at_fpr
        return need is None or self.resolution is None or self.resolution <= need + 1e-12


@dataclass
class Group:
    attack: str
    dataset: str
    threat: str
    reconstruction: str                # shared by every entry, else "" (each entry names its own)
    metrics: list[Reading]             # headline metrics; the first ranks
    entries: list[Entry]               # ranked, most leakage first
    reference: str | None              # the reference method's label, where the group has it
    asked: str = REFERENCE             # the reference the reader asked for
    partition: str = ""
    setting: str = ""                  # the training setting every entry shares ("epochs=5"), if set
    scope: str = ""                    # partition and setting, where the report has several
    units: str = "victims"             # what n counts: victims, or victim-seed pairs over several seeds

    @property
    def data(self) -> str:
        """The data the group's methods were attacked on, as the report names it."""
        return f"{self.dataset} ({self.scope})" if self.scope else self.dataset

    @property
    def primary(self) -> Reading:
        return self.metrics[0]

    def entry(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.name == name), None)

    def reference_for(self, e: Entry) -> Entry | None:
        """The reference method's entry through the same reconstruction, else its most leaking one."""
        refs = [r for r in self.entries if r.method == self.reference]
        same = [r for r in refs if r.reconstruction == e.reconstruction]
        return (same or refs)[0] if refs else None


def fpr_resolution(result: LoadedResult) -> float | None:
    """1/#non-members, as the membership attacks record it; else read from the ROC curve's first step."""
    info = result.result.extra.get("membership") if isinstance(result.result.extra, dict) else None
    if isinstance(info, dict):
        if isinstance(info.get("fpr_resolution"), (int, float)):
            return float(info["fpr_resolution"])
        if isinstance(info.get("nonmembers"), int) and info["nonmembers"] > 0:
            return 1.0 / info["nonmembers"]
    fpr = [f for f in result.result.curves.get("roc_fpr", []) if f > 0]
    return min(fpr) if fpr else None


def coarsest_resolution(results: Iterable[LoadedResult]) -> float | None:
    """The lowest FPR every one of the results resolves (the largest 1/#non-members), or None
    when none says: below it a TPR pooled or averaged over them is not measured."""
    known = [x for x in (fpr_resolution(r) for r in results) if x is not None]
    return max(known) if known else None


def _pick_reference(methods: Iterable[str], reference: str) -> str | None:
    methods = list(methods)
    if reference in methods:
        return reference
    bare = [m for m in methods if without_variant(m) == reference]
    return bare[0] if len(bare) == 1 else None


def require_reference(results: list[LoadedResult], reference: str) -> None:
    """A reference the user named must be among the results: a typo would silently give a verdict
    without any comparison (the default, FedAvg, may be absent, so it is not required)."""
    methods = {r.run.label for r in results}
    if reference not in methods | {without_variant(m) for m in methods}:
        raise UserError(f"--reference {reference}{did_you_mean(reference, methods)}: no result attacks that "
                        "method; the results hold "
                        f"{', '.join(sorted(methods)) or 'no method'}")


def build_groups(results: list[LoadedResult], reference: str = REFERENCE) -> list[Group]:
    """Every comparison group, methods ranked, intervals, differences and flags filled in."""
    buckets: dict[tuple[str, str, str, str, str], list[LoadedResult]] = defaultdict(list)
    for r in results:
        if r.result.applicable:  # reconstructions differ by method (uplink, factors), so they do not split groups
            buckets[(r.result.attack, r.run.dataset, r.run.partition, r.run.setting, threat_label(r))].append(r)
    groups = []
    for (attack, dataset, partition, setting, threat), members in sorted(buckets.items(),
                                                                        key=lambda kv: _order(kv[0])):
        declared = merged(r.result for r in members)
        keys = headlines(attack, {m for r in members for m in r.result.metrics}, declared)
        if not keys:
            continue
        entries = _entries(members, keys)
        recons = {e.reconstruction for e in entries}
        group = Group(attack, dataset, threat, recons.pop() if len(recons) == 1 else "",
                      [reading(k, declared) for k in keys], entries,
                      _pick_reference((e.method for e in entries), reference), reference, partition, setting,
                      units=units_word(members))
        _rank(group)
        _compare(group)
        groups.append(group)
    _name_scopes(groups)
    return groups


def _name_scopes(groups: list[Group]) -> None:
    """Groups are per partition and training setting: methods are compared, and victims paired,
    only on the same data and recipe (a grid over local epochs is one verdict per epoch count).
    Where the report holds several, each group's title names its own."""
    several = len({g.partition for g in groups}) > 1
    for g in groups:
        g.scope = ", ".join(p for p in (g.partition if several else "", g.setting) if p)


def _order(key: tuple[str, str, str, str, str]) -> tuple[object, ...]:
    """Realistic adversaries before the oracle's upper bound, as in the detail tables."""
    attack, dataset, partition, setting, threat = key
    return (dataset, partition, setting, attack, "upper bound" in threat, threat)


def _entries(members: list[LoadedResult], metrics: list[str]) -> list[Entry]:
    by_method: dict[tuple[str, str], list[LoadedResult]] = defaultdict(list)
    for r in members:
        by_method[(r.run.label, r.result.reconstruction)].append(r)
    several = {m for m, _ in by_method if sum(1 for k in by_method if k[0] == m) > 1}
    entries = []
    for (method, recon), rs in by_method.items():
        values = {m: {unit(r): float(r.result.metrics[m]) for r in rs
                      if isinstance(r.result.metrics.get(m), (int, float)) and math.isfinite(r.result.metrics[m])}
                  for m in metrics}
        name = f"{method} ({recon})" if method in several or len({k[1] for k in by_method}) > 1 else method
        entry = Entry(method, recon, name, values, resolution=coarsest_resolution(rs))
        entry.stats = {m: estimate(rs, m) for m in metrics}  # the absolute verdict's own estimate
        entries.append(entry)
    return entries


def _rank(group: Group) -> None:
    sign = 1.0 if group.primary.leak == "higher" else -1.0

    def leakage(e: Entry) -> tuple[float, str]:
        mean = e.stats[group.primary.key].mean
        return (-sign * mean if math.isfinite(mean) else math.inf, e.name)

    group.entries.sort(key=leakage)


def _compare(group: Group) -> None:
    m = group.primary
    for e in group.entries:
        ref = group.reference_for(e)
        if ref is not None and ref.method != e.method:
            e.diff, e.against = difference_interval(e.values[m.key], ref.values[m.key]), ref.name
        e.flags = flags(e.stats[m.key], m)


def flags(s: Interval, m: Reading) -> list[str]:
    """What a reader must know about one number before trusting it, each with its reason."""
    out = []
    if s.n < 2:
        out.append(f"no interval (n={s.n})")
    at = f"{m.chance * m.scale:g}{m.suffix}" if m.chance is not None else ""
    if m.chance is not None and s.contains(m.chance):
        out.append(f"{m.label} holds chance ({at})")
    elif m.chance is not None and (s.below(m.chance) if m.leak == "higher" else s.above(m.chance)):
        out.append(f"{m.label} below chance ({at}; see the verdict above for why)")
    return out


def category(group: Group, entry: Entry) -> str:
    """The one category an entry lands in, from its difference to the reference alone."""
    if group.reference is None:
        return "alone"
    if entry.method == group.reference:
        return "reference"
    d = entry.diff
    ref = group.entry(entry.against) if entry.against else None
    m = group.primary
    if d is None or ref is None or not d.interval.has_interval or not (
            entry.stats[m.key].has_interval and ref.stats[m.key].has_interval):
        return "undecided"
    if d.interval.contains(0.0):
        return "same"
    return "more" if d.interval.above(0.0) == (m.leak == "higher") else "less"
