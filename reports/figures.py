"""ROC curves and privacy-against-utility plots, drawn from result files with matplotlib (Agg).

ROC curves of one threat model share a plot, one curve per method (and reconstruction), the
mean over victims and seeds taken vertically on a common FPR grid; a second panel puts FPR on
a log scale, because what matters for membership inference is the TPR at low FPR (Carlini et
al. 2022), which a linear axis squeezes into its corner.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedattack.reports import metric_info  # noqa: E402
from fedattack.reports.aggregate import (  # noqa: E402
    Stat,
    Table,
    data_name,
    row_key,
    several_partitions,
    threat_label,
)
from fedattack.reports.collect import LoadedResult  # noqa: E402
from fedattack.reports.labels import place_labels  # noqa: E402
from fedattack.reports.leakage import merged, reading  # noqa: E402
from fedattack.reports.verdict import coarsest_resolution  # noqa: E402

FigureList = list[tuple[Path, str]]
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = "osD^vP*X"


def series_styles(n: int) -> list[dict[str, Any]]:
    """Line styles that stay distinct for any number of series.

    Up to 10 series take tab10; up to 20, tab20 with its dark shades first, so neighbours
    differ in hue; beyond that the 20 colours repeat with a new dash pattern each round, and
    after the dash patterns run out, with a marker as well.
    """
    if n <= 10:
        colours = [plt.get_cmap("tab10")(i) for i in range(10)]
    else:
        tab20 = plt.get_cmap("tab20")
        colours = [tab20(i) for i in (*range(0, 20, 2), *range(1, 20, 2))]
    k, styles = len(colours), []
    for i in range(n):
        cycle = i // k
        marker = MARKERS[(cycle // len(LINE_STYLES) - 1) % len(MARKERS)] if cycle >= len(LINE_STYLES) else None
        styles.append({"color": colours[i % k], "ls": LINE_STYLES[cycle % len(LINE_STYLES)], "marker": marker})
    return styles


def value_range(metric: str, results: Sequence[LoadedResult] = ()) -> tuple[float | None, float | None]:
    """A metric's possible values in display units, as its results declare them (else the
    built-in fallback: rates in [0, 100] %, the AUC in [0, 1]); None is unbounded."""
    m = reading(metric, merged(r.result for r in results))
    low, high = m.bounds
    return (None if low is None else low * m.scale, None if high is None else high * m.scale)


def clipped_error(stat: Stat, bounds: tuple[float | None, float | None]) -> list[list[float]]:
    """mean ± std as matplotlib's asymmetric error, cut at the metric's limits (no rate above 100%)."""
    low, high = bounds
    down = stat.std if low is None else max(0.0, min(stat.std, stat.mean - low))
    up = stat.std if high is None else max(0.0, min(stat.std, high - stat.mean))
    return [[down], [up]]


def slug(*parts: str) -> str:
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-")


def mean_roc(results: list[LoadedResult]) -> tuple[np.ndarray, np.ndarray] | None:
    """Vertical average of every ROC curve on the union of their FPR points."""
    curves = [(np.asarray(r.result.curves["roc_fpr"], float), np.asarray(r.result.curves["roc_tpr"], float))
              for r in results if r.result.applicable and "roc_fpr" in r.result.curves and "roc_tpr" in r.result.curves]
    curves = [(f, t) for f, t in curves if f.size and f.size == t.size]
    if not curves:
        return None
    grid = np.unique(np.concatenate([[0.0, 1.0], *(f for f, _ in curves)]))
    tprs = [np.interp(grid, *_monotone(f, t)) for f, t in curves]
    return grid, np.mean(tprs, axis=0)


def _monotone(fpr: np.ndarray, tpr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((tpr, fpr))
    return fpr[order], tpr[order]


def roc_figures(results: list[LoadedResult], out: Path) -> FigureList:
    groups: dict[tuple[str, str, str], dict[str, list[LoadedResult]]] = defaultdict(lambda: defaultdict(list))
    several = several_partitions(results)  # one figure per partition, not their ROCs averaged
    for r in results:
        if "roc_fpr" in r.result.curves:
            label = r.run.label + ("" if r.result.reconstruction in ("none", "") else f" / {r.result.reconstruction}")
            groups[(r.result.attack, data_name(r, several), threat_label(r))][label].append(r)
    figures: FigureList = []
    for (attack, dataset, threat), by_label in sorted(groups.items()):
        fig, (lin, log) = plt.subplots(1, 2, figsize=(11, 4.6))
        floors = []
        for label, style in zip(sorted(by_label), series_styles(len(by_label))):
            roc = mean_roc(by_label[label])
            if roc is None:
                continue
            auc = Stat.of(r.result.metrics.get("auc", float("nan")) for r in by_label[label])
            name = f"{label} (AUC {auc.mean:.3f}, n={auc.n})" if auc.n else label
            # below the coarsest 1/#non-members the mean curve is interpolated toward (0, 0)
            floor = coarsest_resolution(by_label[label]) or 1e-3
            floors.append(floor)
            for ax, keep in ((lin, roc[0] >= 0), (log, roc[0] >= floor)):
                ax.plot(roc[0][keep], roc[1][keep], label=name, lw=1.5, color=style["color"],
                        ls=style["ls"], marker=style["marker"], markevery=0.1, ms=4)
        for ax, scale in ((lin, "linear"), (log, "log")):
            ax.plot([1e-4, 1], [1e-4, 1], ls=":", color="black", lw=1, label="chance")
            ax.set_xscale(scale)
            ax.set_yscale(scale)
            ax.set_xlabel("false positive rate")
            ax.set_ylabel("true positive rate")
            ax.grid(alpha=.3, which="both")
        lin.set_xlim(0, 1)
        lin.set_ylim(0, 1)
        low = min(floors, default=1e-3)
        log.set_xlim(low, 1)
        log.set_ylim(low, 1)
        lin.set_title(f"{attack} ROC, {threat}, {dataset}")
        log.set_title("log-log view (low FPR)")
        lin.legend(fontsize=8 if len(by_label) <= 12 else 6, loc="lower right",
                   ncol=1 if len(by_label) <= 12 else 2)
        path = out / f"roc-{slug(attack, dataset, threat)}.png"
        _save(fig, path)
        figures.append((path, (f"{attack} ROC curves against the {threat} on {dataset}: mean over victims "
                              "and seeds; right: both axes on a log scale, each curve drawn from 1/#non-members "
                              "of its attacks (below it the data cannot tell a rate from zero).")))
    return figures


def privacy_utility_figure(results: list[LoadedResult], tables: list[Table], out: Path,
                           stacked: bool = False) -> FigureList:
    """For each attack: its summary metric against the attacked federations' mean local accuracy.

    `stacked` puts the panels one above the other, for a narrow column beside the verdict."""
    attacks = [t for t in tables if t.kind == "attack" and "baseline" not in t.name]
    chosen = [(t, metric_info.privacy_metric(t.metrics, t.declared)) for t in attacks if t.metrics]
    panels = [(t, m) for t, m in chosen if m is not None]
    if not panels:
        return []
    n = len(panels)
    shape, size = ((n, 1), (5.6, 3.8 * n + 0.8)) if stacked else ((1, n), (5.6 * n, 5.2))
    # constrained: the one legend goes below the panels, where it cannot cover a point
    fig, axes = plt.subplots(*shape, figsize=size, squeeze=False, layout="constrained")
    methods = sorted({row.key[1] for t, _ in panels for row in t.rows})
    styles = dict(zip(methods, series_styles(len(methods))))
    threats = sorted({row.key[2] for t, _ in panels for row in t.rows}, key=lambda t: ("upper bound" in t, t))
    marks = {t: MARKERS[i % len(MARKERS)] for i, t in enumerate(threats)}
    for ax, (table, metric) in zip(axes.flat, panels):
        _privacy_panel(ax, results, table, metric, styles, marks)
    _legend(fig, styles, marks)
    path = out / "privacy-utility.png"
    _save(fig, path)
    return [(path, ("Attack success (its headline metric) against utility: colour = method, marker = threat "
                   "model, a label names the data where there are several and the reconstruction where one "
                   "was guessed; bars are one standard "
                   "deviation over seeds and victims, cut at the metric's range."))]


def _privacy_panel(ax: plt.Axes, results: list[LoadedResult], table: Table, metric: str,
                   styles: dict[str, dict[str, Any]], marks: dict[str, str]) -> None:
    limits = value_range(metric, results)
    several_data = len({row.key[0] for row in table.rows}) > 1  # then a point names its data
    notes = []
    for row in table.rows:
        privacy = row.cells.get(metric)
        utility = _utility(results, table.name, row.key)
        if not isinstance(privacy, Stat) or privacy.n == 0 or utility.n == 0:
            continue
        hollow = "upper bound" in row.key[2]  # the oracle is not a realistic adversary: drawn open
        style = styles[row.key[1]]
        bars = ax.errorbar(utility.mean, privacy.mean, xerr=clipped_error(utility, (0.0, 100.0)),
                           yerr=clipped_error(privacy, limits), fmt=marks[row.key[2]], color=style["color"],
                           mfc="none" if hollow else style["color"], capsize=2, alpha=.85, ms=8 if hollow else 6)
        for lines in bars[2]:
            lines.set_linestyle(style["ls"])
        note = ", ".join([row.key[0]] * several_data + [row.key[3]] * (row.key[3] not in ("none", "", "true")))
        if note:
            notes.append((note, utility.mean, privacy.mean))
    place_labels(ax, notes)
    ax.set_xlabel("mean local test accuracy of the attacked federation (%)")
    ax.set_ylabel(f"{table.title}: {table.label(metric)}")
    ax.set_title(f"{table.title}: privacy against utility")
    ax.grid(alpha=.3)


def _utility(results: list[LoadedResult], attack: str, key: tuple[str, ...]) -> Stat:
    """The utility of the runs behind one detail-table row (the same key the table built)."""
    mine = [r for r in results if r.result.attack == attack]
    several = several_partitions(mine)
    runs = {r.run.ident: r.run for r in mine if row_key(r, several) == key}
    return Stat.of(run.utility.get("mean", float("nan")) for run in runs.values())


def _legend(fig: plt.Figure, styles: dict[str, dict[str, Any]], marks: dict[str, str]) -> None:
    """One legend for every panel (they share colours and markers), outside the axes: inside,
    `loc="best"` still covered points when the panel had no empty corner."""
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=s["color"], marker="o", ls=s["ls"], label=m) for m, s in styles.items()]
    handles += [Line2D([], [], color="black", marker=k, ls="", label=t, mfc="none" if "upper bound" in t else "black")
                for t, k in marks.items()]
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=min(len(handles), 4))


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        with warnings.catch_warnings():  # a crowded panel keeps its layout; the warning was terminal noise
            warnings.filterwarnings("ignore", message="Tight layout not applied")
            fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
