"""The table and the privacy-against-utility figure of docs/defences.md, from files only.

Reads, for each setting NAME under a folder: the run directory NAME/ (utility, the accountant's
epsilon), audits/NAME.json (`fedattack audit`), results/NAME-lira/ and results/NAME-inv/
(`fedattack evaluate` summaries). Usage: python docs/defences_figure.py FOLDER OUT.png
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from scipy.stats import t  # noqa: E402

LEVELS = ["none", "dp0.01", "dp0.1", "dp1.0"]
METHODS = {"fedavg": "FedAvg", "waffle": "WAFFLe (ibp-wf)"}


def read(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def interval(mean: float, std: float, n: int) -> str:
    """mean ± the half-width of a 95% t-interval (std is the population one over n)."""
    if n < 2:
        return f"{mean:.2f} (n={n})"
    half = t.ppf(0.975, n - 1) * std * math.sqrt(n / (n - 1)) / math.sqrt(n)
    return f"{mean:.2f} ± {half:.2f} (n={n})"


def metric(folder: Path, key: str) -> dict[str, float] | None:
    summary = read(folder / "summary.json")
    if not summary:
        return None
    for group in summary["groups"]:
        if key in group["metrics"]:
            return dict(group["metrics"][key])
    return None


def row(root: Path, method: str, level: str) -> dict[str, Any]:
    name = f"{method}-{level}"
    manifest = read(root / name / "federation.json") or {}
    metrics = read(root / name / "metrics.json") or {}
    acc = [100 * a for a in metrics.get("rounds", [{}])[-1].get("accuracy", [])]  # stored as fractions
    eps = next((d["accounting"].get("epsilon") for d in manifest.get("defences", []) if "accounting" in d), None)
    audit = read(root / "audits" / f"{name}.json") or {}
    sigma = next((d["settings"]["noise_multiplier"] for d in manifest.get("defences", [])), None)
    return {"name": name, "method": METHODS[method], "sigma": sigma, "accuracy": acc, "epsilon": eps,
            "audit": audit, "auc": metric(root / "results" / f"{name}-lira", "auc"),
            "tpr": metric(root / "results" / f"{name}-lira", "tpr_at_1fpr"),
            "psnr": metric(root / "results" / f"{name}-inv", "psnr")}


def fmt_eps(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| method | sigma | mean local accuracy (%) | LiRA-offline AUC | TPR @ 1% FPR (%) | "
            "update-inversion PSNR (dB) | accountant epsilon | audit run: claimed epsilon | "
            "audited epsilon, final model | audited epsilon, every round |")
    lines = [head, "| " + " | ".join(["---"] * (head.count("|") - 1)) + " |"]
    for r in rows:
        acc = r["accuracy"]
        n = len(acc)
        mean = sum(acc) / n if n else float("nan")
        std = math.sqrt(sum((a - mean) ** 2 for a in acc) / n) if n else float("nan")
        views = r["audit"].get("views", {})
        cells = [r["method"], "-" if r["sigma"] is None else f"{r['sigma']:g}",
                 interval(mean, std, n) if n else "-",
                 interval(r["auc"]["mean"], r["auc"]["std"], r["auc"]["n"]) if r["auc"] else "-",
                 interval(r["tpr"]["mean"] * 100, r["tpr"]["std"] * 100, r["tpr"]["n"]) if r["tpr"] else "-",
                 interval(r["psnr"]["mean"], r["psnr"]["std"], r["psnr"]["n"]) if r["psnr"] else "-",
                 fmt_eps(r["epsilon"]), fmt_eps(r["audit"].get("claimed", {}).get("epsilon")) if r["audit"] else "-"]
        for view in ("final", "rounds"):
            v = views.get(view)
            cells.append(f"{v['epsilon']:.2f} ({v['correct']}/{v['guesses']}, AUC {v['auc']:.2f})" if v else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(rows: list[dict[str, Any]], out: Path) -> None:
    """(a) utility against the noise multiplier; (b) epsilon (log scale) against utility: the
    accountant's (filled) and, where an audit finished, the audited one (hollow)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for method in METHODS.values():
        mine = [r for r in rows if r["method"] == method and r["accuracy"]]
        x = [sum(r["accuracy"]) / len(r["accuracy"]) for r in mine]
        half = [t.ppf(0.975, len(r["accuracy"]) - 1) * _std(r["accuracy"]) / math.sqrt(len(r["accuracy"]))
                for r in mine]
        sigma = [r["sigma"] or 1e-3 for r in mine]
        left.errorbar(sigma, x, yerr=half, marker="o", capsize=3, label=method)
        dp = [(xi, r) for xi, r in zip(x, mine) if r["epsilon"] is not None]
        line = right.plot([xi for xi, _ in dp], [r["epsilon"] for _, r in dp], marker="o",
                          label=f"{method}: accountant")
        audited = [(xi, r["audit"]["views"]["rounds"]["epsilon"]) for xi, r in dp if r["audit"]]
        if audited:
            right.plot(*zip(*audited), marker="o", ls=":", mfc="none", color=line[0].get_color(),
                       label=f"{method}: audited (every round)")
        for xi, r in dp:
            right.annotate(f"σ={r['sigma']:g}", (xi, r["epsilon"]), fontsize=7, textcoords="offset points",
                           xytext=(3, 3))
    left.set_xscale("log")
    left.set(xlabel="noise multiplier σ (no DP drawn at 1e-3)", ylabel="mean local test accuracy (%)",
             title="utility against noise (95% CI over clients)")
    right.set_yscale("log")
    right.set(xlabel="mean local test accuracy (%)", ylabel="epsilon at δ = 1e-5",
              title="privacy against utility")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    rows = [row(root, m, lv) for m in METHODS for lv in LEVELS]
    print(table(rows))
    figure(rows, out)


if __name__ == "__main__":
    main()
