"""Group results into table rows and summarise each metric by mean and standard deviation.

A row is one (dataset, method, threat model, reconstruction) for an attack, or one (dataset,
partition, method) for utility; its numbers are the mean and the population standard deviation
(numpy's default, ddof=0) over every seed and victim that row holds, with the count n beside
them, so a reader can tell one run from ten. Rows and columns come from the results, never
from a list of method names.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from fedattack.reports import metric_info
from fedattack.reports.collect import Inputs, LoadedResult, RunInfo


@dataclass(frozen=True)
class Stat:
    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Stat:
        arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
        if arr.size == 0:
            return cls(float("nan"), float("nan"), 0)
        return cls(float(arr.mean()), float(arr.std()), int(arr.size))

    def scaled(self, factor: float) -> Stat:
        return Stat(self.mean * factor, self.std * factor, self.n)


Cell = Stat | str | None


@dataclass
class Row:
    key: tuple[str, ...]
    cells: dict[str, Cell]
    n: int = 0
    note: str = ""


@dataclass
class Table:
    """A rendered-ready table: key columns, metric columns (display units), rows."""

    name: str
    title: str
    kind: str
    key_names: list[str]
    metrics: list[str]
    rows: list[Row] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    digits: dict[str, int] = field(default_factory=dict)
    caption: str = ""
    declared: dict[str, metric_info.MetricInfo] = field(default_factory=dict)  # from the results

    def info(self, metric: str) -> metric_info.MetricInfo:
        return metric_info.info(metric, self.kind, self.declared)

    def label(self, metric: str) -> str:
        return self.labels.get(metric) or self.info(metric).label


    def row(self, *key: str) -> Row | None:
        return next((r for r in self.rows if r.key == tuple(key)), None)


def threat_label(loaded: LoadedResult) -> str:
    """The oracle is given the victim's private state on purpose: say so wherever it appears."""
    name = loaded.result.threat_model
    return f"{name} (upper bound)" if loaded.result.upper_bound else name


def attack_tables(inputs: Inputs) -> list[Table]:
    """One table per attack, and one per baseline an attack reported beside itself."""
    groups: dict[str, list[LoadedResult]] = defaultdict(list)
    for loaded in inputs.results:
        groups[loaded.result.attack].append(loaded)
    tables = []
    for attack in sorted(groups):
        tables.append(_attack_table(attack, groups[attack], baseline=None))
        names = sorted({b for r in groups[attack] for b in r.result.baselines})
        tables.extend(_attack_table(attack, groups[attack], baseline=b) for b in names)
    return tables


def _attack_table(attack: str, results: list[LoadedResult], baseline: str | None) -> Table:
    def metrics_of(r: LoadedResult) -> dict[str, float]:
        return r.result.baselines.get(baseline, {}) if baseline else r.result.metrics

    buckets: dict[tuple[str, ...], list[LoadedResult]] = defaultdict(list)
    several = several_partitions(results)
    for r in results:
        buckets[row_key(r, several)].append(r)
    names = {m for r in results if r.result.applicable for m in metrics_of(r)}
    known = metric_info.declared(r.result.declared() for r in results)
    metrics = metric_info.order(names, "attack", known)
    title = f"{attack}" + (f" (baseline: {baseline})" if baseline else "")
    stem = f"{attack}" + (f"-baseline-{baseline}" if baseline else "")
    table = Table(stem, title, "attack", ["dataset", "method", "threat model", "reconstruction"], metrics,
                  declared=known)
    for key in sorted(buckets, key=_row_order):
        members = buckets[key]
        live = [r for r in members if r.result.applicable]
        cells: dict[str, Cell] = {}
        for m in metrics:
            scale = table.info(m).scale
            cells[m] = Stat.of(metrics_of(r).get(m, float("nan")) for r in live).scaled(scale)
        notes = sorted({r.result.note for r in members if not r.result.applicable and r.result.note})
        note = ("not applicable: " + "; ".join(notes)) if notes else ("not applicable" if not live else "")
        table.rows.append(Row(key, cells, n=len(live), note=note))
    return table


def several_partitions(results: list[LoadedResult]) -> bool:
    """Whether the results span partitions: then rows and figures name each one's partition."""
    return len({r.run.partition for r in results}) > 1


def data_name(r: LoadedResult, several: bool) -> str:
    """The data a result was attacked on, as rows and figures name it."""
    return f"{r.run.dataset} ({r.run.partition})" if several else r.run.dataset


def row_key(r: LoadedResult, several: bool) -> tuple[str, ...]:
    """The detail-table row a result belongs to (data, method, threat model, reconstruction)."""
    return (data_name(r, several), r.run.label, threat_label(r), r.result.reconstruction)


def _row_order(key: tuple[str, ...]) -> tuple[object, ...]:
    """Upper bounds after the realistic adversaries, so a reader meets the real threat first."""
    return (key[0], key[1], "upper bound" in key[2], key[2], *key[3:])


def utility_table(inputs: Inputs, extra: Iterable[str] = ()) -> Table | None:
    """Mean over seeds of each run's final utility summary (and any requested extra metric)."""
    if not inputs.runs:
        return None
    buckets: dict[tuple[str, ...], list[RunInfo]] = defaultdict(list)
    for run in inputs.runs:
        buckets[(run.dataset, run.partition, run.label)].append(run)
    wanted = set(extra)
    names = {m for run in inputs.runs for m in run.utility
             if m in metric_info.UTILITY_METRICS and m != "agent0_best" or m.startswith("group:")}
    metrics = metric_info.order(names | (wanted & {m for r in inputs.runs for m in r.utility}), "utility")
    table = Table("utility", "utility", "utility", ["dataset", "partition", "method"], metrics,
                  caption="Final-round local test accuracy of each client's deployed model; "
                          "mean and std over seeds (n runs).")
    for key in sorted(buckets):
        runs = buckets[key]
        cells: dict[str, Cell] = {m: Stat.of(r.utility.get(m, float("nan")) for r in runs) for m in metrics}
        table.rows.append(Row(key, cells, n=len(runs)))
    return table
