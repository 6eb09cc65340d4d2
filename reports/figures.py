"""ROC curves and privacy-against-utility plots, drawn from result files with matplotlib (Agg).

ROC curves of one threat model share a plot, one curve per method (and reconstruction), the
mean over victims and seeds taken vertically on a common FPR grid; a second panel puts FPR on
a log scale, because what matters for membership inference is the TPR at low FPR (Carlini et
al. 2022), which a linear axis squeezes into its corner.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedattack.reports import metric_info  # noqa: E402
from fedattack.reports.aggregate import Stat, Table, threat_label  # noqa: E402
from fedattack.reports.collect import LoadedResult  # noqa: E402

FigureList = list[tuple[Path, str]]


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
    for r in results:
        if "roc_fpr" in r.result.curves:
            label = r.run.label + ("" if r.result.reconstruction in ("none", "") else f" / {r.result.reconstruction}")
            groups[(r.result.attack, r.run.dataset, threat_label(r))][label].append(r)
    figures: FigureList = []
    for (attack, dataset, threat), by_label in sorted(groups.items()):
        fig, (lin, log) = plt.subplots(1, 2, figsize=(11, 4.6))
        for label in sorted(by_label):
            roc = mean_roc(by_label[label])
            if roc is None:
                continue
            auc = Stat.of(r.result.metrics.get("auc", float("nan")) for r in by_label[label])
            name = f"{label} (AUC {auc.mean:.3f}, n={auc.n})" if auc.n else label
            for ax in (lin, log):
                ax.plot(roc[0], roc[1], label=name, lw=1.5)
        for ax, scale in ((lin, "linear"), (log, "log")):
            ax.plot([1e-4, 1], [1e-4, 1], ls="--", color="grey", lw=1, label="chance")
            ax.set_xscale(scale)
            ax.set_yscale(scale)
            ax.set_xlabel("false positive rate")
            ax.set_ylabel("true positive rate")
            ax.grid(alpha=.3, which="both")
        lin.set_xlim(0, 1)
        lin.set_ylim(0, 1)
        log.set_xlim(1e-3, 1)
        log.set_ylim(1e-3, 1)
        lin.set_title(f"{attack} ROC, {threat}, {dataset}")
        log.set_title("log-log view (low FPR)")
        lin.legend(fontsize=8, loc="lower right")
        path = out / f"roc-{slug(attack, dataset, threat)}.png"
        _save(fig, path)
        figures.append((path, f"{attack} ROC curves against the {threat} on {dataset}: mean over victims "
                              "and seeds; right: both axes on a log scale."))
    return figures


def privacy_utility_figure(results: list[LoadedResult], tables: list[Table], out: Path) -> FigureList:
    """For each attack: its summary metric against the attacked federations' mean local accuracy."""
    attacks = [t for t in tables if t.kind == "attack" and "baseline" not in t.name]
    panels = [(t, metric_info.privacy_metric(t.metrics)) for t in attacks if t.metrics]
    panels = [(t, m) for t, m in panels if m is not None]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 4.6), squeeze=False)
    methods = sorted({row.key[1] for t, _ in panels for row in t.rows})
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    for ax, (table, metric) in zip(axes[0], panels):
        threats = sorted({row.key[2] for row in table.rows}, key=lambda t: ("upper bound" in t, t))
        marks = {t: "osD^vP*X"[i % 8] for i, t in enumerate(threats)}
        for row in table.rows:
            privacy = row.cells.get(metric)
            utility = _utility(results, table.name, row.key)
            if not isinstance(privacy, Stat) or privacy.n == 0 or utility.n == 0:
                continue
            hollow = "upper bound" in row.key[2]  # the oracle is not a realistic adversary: drawn open
            ax.errorbar(utility.mean, privacy.mean, xerr=utility.std, yerr=privacy.std, fmt=marks[row.key[2]],
                        color=colours[row.key[1]], mfc="none" if hollow else colours[row.key[1]],
                        capsize=2, alpha=.85, ms=8 if hollow else 6)
            if row.key[3] not in ("none", "", "true"):
                ax.annotate(row.key[3], (utility.mean, privacy.mean), fontsize=7, xytext=(4, 3),
                            textcoords="offset points")
        _legend(ax, {m: colours[m] for m in methods if any(r.key[1] == m for r in table.rows)}, marks)
        ax.set_xlabel("mean local test accuracy of the attacked federation (%)")
        ax.set_ylabel(f"{table.title}: {table.label(metric)}")
        ax.set_title(f"{table.title}: privacy against utility")
        ax.grid(alpha=.3)
    path = out / "privacy-utility.png"
    _save(fig, path)
    return [(path, "Attack success (higher = more leakage) against utility: colour = method, marker = threat "
                   "model, a label names the reconstruction where one was guessed; bars are one standard "
                   "deviation over seeds and victims.")]


def _utility(results: list[LoadedResult], attack: str, key: tuple[str, ...]) -> Stat:
    runs = {r.run.ident: r.run for r in results if r.result.attack == attack
            and (r.run.dataset, r.run.label, threat_label(r), r.result.reconstruction) == key}
    return Stat.of(run.utility.get("mean", float("nan")) for run in runs.values())


def _legend(ax: plt.Axes, colours: dict[str, object], marks: dict[str, str]) -> None:
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=c, marker="o", ls="", label=m) for m, c in colours.items()]
    handles += [Line2D([], [], color="black", marker=k, ls="", label=t, mfc="none" if "upper bound" in t else "black")
                for t, k in marks.items()]
    ax.legend(handles=handles, fontsize=7, loc="best")


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
