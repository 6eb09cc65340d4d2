"""The tables and the figure of docs/defences.md, from files only.

    .venv/bin/python benchmarks/lab/defences_figure.py FOLDER docs/defences.png

FOLDER holds `grid/` (the output of `fedattack experiment run fedattack/experiments/defences-dp.toml
--out FOLDER/grid`: sweep.json, runs/, results/), `audits/<run folder>.json` (`fedattack audit`
of each run) and `recon/` (the output of `fedattack/experiments/defences-reconstruction.toml`, the
reconstruction setting: `defences_reconstruction.py`). One row per run directory under grid/runs
(and recon/runs), named by its method and its dp-fedavg noise multiplier.
Membership figures pool every victim's queries (AUC and TPR at 1% FPR with 95%
stratified bootstrap intervals, `membership_metrics.intervals`; a TPR below 1/#non-members is
not printed); update inversion pools the victims' matched images (share above 20 dB and mean
PSNR, 95% percentile bootstrap over victims, images of one victim kept together).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from scipy.stats import t  # noqa: E402

from fedattack.attacks.membership.metrics import intervals, pooled, ranking  # noqa: E402

METHODS = {"fedavg": "FedAvg", "waffle-ibp": "WAFFLe (searched recipe)"}
RECIPES = {"personal": "WAFFLe (personal recipe)"}  # waffle-ibp's named recipes, labelled apart
MEMBERSHIP = ("rmia", "lira-offline")
RECOVERED_DB = 20.0
NO_DP = 1e-4  # where the undefended cell is drawn on the log sigma axis (below sigma = 1e-3)


def read(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def sigma_of(spec: dict[str, Any]) -> float | None:
    return next((float(d["settings"]["noise_multiplier"]) for d in spec.get("defences", [])
                 if d["name"] == "dp-fedavg"), None)


def accuracy(run: Path) -> list[float]:
    metrics = read(run / "metrics.json") or {}
    return [100 * a for a in metrics.get("rounds", [{}])[-1].get("accuracy", [])]  # stored as fractions


def accounting(run: Path) -> dict[str, Any]:
    manifest = read(run / "federation.json") or {}
    return next((d["accounting"] for d in manifest.get("defences", []) if "accounting" in d), {})


def attack_results(folders: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Per-victim results of the sweep's evaluation cells of one run, by attack."""
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(p for folder in folders for p in folder.glob("*.json")):
        if path.name in ("summary.json", "cell.json"):
            continue
        result = json.loads(path.read_text())
        if "attack" in result:
            out.setdefault(result["attack"], []).append(result)
    return out


def membership(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    usable = [r for r in results if r.get("applicable", True) and "membership" in r.get("extra", {})]
    if not usable:
        return None
    truth, scores = pooled([r["extra"]["membership"]["per_query"] for r in sorted(usable, key=lambda r: r["victim"])])
    metrics, _ = ranking(truth, scores)
    return {"victims": len(usable), "members": int(truth.sum()), "nonmembers": int((~truth).sum()),
            "metrics": metrics, "ci": intervals(truth, scores)}


def inversion(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    usable = [r for r in results
              if r.get("applicable", True) and "psnr" in r.get("extra", {}).get("reconstruction_match", {})]
    if not usable:
        return None
    groups = [np.asarray(r["extra"]["reconstruction_match"]["psnr"], float) for r in usable]
    rng = np.random.default_rng(0)

    def ci(stat: Any) -> list[float]:
        draws = [stat(np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))]))
                 for _ in range(2000)]
        return [float(v) for v in np.percentile(draws, [2.5, 97.5])]

    def share(v: np.ndarray) -> float:
        return float((v > RECOVERED_DB).mean())

    everything = np.concatenate(groups)
    return {"victims": len(groups), "images": len(everything), "share": share(everything),
            "share_ci": ci(share), "psnr": float(everything.mean()), "psnr_ci": ci(np.mean),
            "seconds": [r.get("seconds") for r in results],
            "per_victim": {r["victim"]: share(g) for r, g in zip(usable, groups)}}


def method_label(spec: dict[str, Any]) -> str:
    recipe = (spec.get("hyper") or {}).get("recipe")
    return RECIPES.get(recipe, METHODS.get(spec["method"], spec["method"]))


def rows(root: Path, sub: str = "grid") -> list[dict[str, Any]]:
    """Every run directory under SUB/runs (the sweep's, and any trained beside it with
    `fedattack train --out SUB/runs/NAME`), with the sweep's evaluation cells of it."""
    sweep = read(root / sub / "sweep.json") or {"cells": []}
    evaluations = [c["folder"] for c in sweep["cells"] if c["kind"] == "evaluation"]
    out = []
    for run in sorted(p for p in (root / sub / "runs").iterdir() if (p / "federation.json").exists()):
        manifest = read(run / "federation.json")
        spec = manifest["spec"]
        attacks = attack_results([root / sub / "results" / e for e in evaluations
                                  if e.startswith(run.name + "/")])
        out.append({"folder": run.name, "method": method_label(spec),
                    "sigma": sigma_of(spec), "m": round(float(spec["fraction"]) * int(spec["num_clients"])),
                    "accuracy": accuracy(run), "accounting": accounting(run), "seconds": manifest.get("seconds"),
                    "membership": {a: membership(attacks.get(a, [])) for a in MEMBERSHIP},
                    "inversion": inversion(attacks.get("update-inversion", [])),
                    "diverged": manifest.get("diverged"),
                    "audit": read(root / "audits" / f"{run.name}.json") or {},
                    "audit_large": read(root / "audits" / f"large-{run.name}.json") or {}})
    return sorted(out, key=lambda r: (r["method"], r["m"], -1 if r["sigma"] is None else r["sigma"]))


def matching(r: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row of the other setting with r's base method, clients a round and sigma (WAFFLe:
    whichever recipe ran there)."""
    base = r["method"].split(" (")[0]
    key = (base, r["m"], r["sigma"])
    return next((o for o in others if (o["method"].split(" (")[0], o["m"], o["sigma"]) == key), None)


def t_interval(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t.ppf(0.975, n - 1) * std / math.sqrt(n)


def fmt_acc(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    mean, half = t_interval(values)
    return f"{mean:.2f} ± {half:.2f} (n={len(values)})"


def fmt_mia(m: dict[str, Any] | None, key: str) -> str:
    if not m or key not in m["metrics"]:
        return "-"
    scale, digits = (1.0, 3) if key == "auc" else (100.0, 1)
    low, high = m["ci"].get(key, [math.nan, math.nan])
    return f"{m['metrics'][key] * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def fmt_inv(inv: dict[str, Any] | None) -> str:
    if not inv:
        return "-"
    lo, hi = inv["share_ci"]
    plo, phi = inv["psnr_ci"]
    return (f"{inv['share'] * 100:.0f}% [{lo * 100:.0f}, {hi * 100:.0f}]; {inv['psnr']:.1f} dB "
            f"[{plo:.1f}, {phi:.1f}]")


def fmt_eps(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


def fmt_audit(view: dict[str, Any] | None) -> str:
    return f"{view['epsilon']:.2f} ({view['correct']}/{view['guesses']}, AUC {view['auc']:.2f})" if view else "-"


def sigma_text(sigma: float | None) -> str:
    return "-" if sigma is None else f"{sigma:g}"


def attack_table(rs: list[dict[str, Any]], recon: list[dict[str, Any]]) -> str:
    """The membership columns of this setting; the update inversion column of the reconstruction
    setting (recon/) at the same method and sigma, said in its header."""
    lines = ["| method | m | sigma | mean local accuracy (%) | RMIA AUC | RMIA TPR @ 1% FPR (%) | offline LiRA AUC | "
             "offline LiRA TPR @ 1% FPR (%) | members / non-members | update inversion, **50-image clients** "
             "(the second setting): recovered > 20 dB; mean PSNR (victims, images) |",
             "| " + " | ".join(["---"] * 10) + " |"]
    for r in rs:
        rmia, lira = r["membership"]["rmia"], r["membership"]["lira-offline"]
        other = matching(r, recon)
        inv = other["inversion"] if other else None
        sizes = f"{rmia['members']} / {rmia['nonmembers']} ({rmia['victims']} victims)" if rmia else "-"
        inv_n = f" ({inv['victims']}, {inv['images']})" if inv else ""
        if other and other["method"] != r["method"]:
            inv_n += f" [{other['method']}]"
        inv_cell = "diverged there: not applicable" if other and other["diverged"] else f"{fmt_inv(inv)}{inv_n}"
        flag = " (diverged: NaN weights)" if r["diverged"] else ""
        lines.append(f"| {r['method']} | {r['m']} | {sigma_text(r['sigma'])} | {fmt_acc(r['accuracy'])}{flag} | "
                     f"{fmt_mia(rmia, 'auc')} | {fmt_mia(rmia, 'tpr_at_1fpr')} | {fmt_mia(lira, 'auc')} | "
                     f"{fmt_mia(lira, 'tpr_at_1fpr')} | {sizes} | {inv_cell} |")
    return "\n".join(lines)


def epsilon_table(rs: list[dict[str, Any]]) -> str:
    lines = ["| method | m | sigma | accountant epsilon: the models | accountant epsilon: each uplink (the server) | "
             "audit run: claimed | audited, final model | audited, every round | 1,000 canaries: claimed | "
             "audited, final | audited, every round |", "| " + " | ".join(["---"] * 11) + " |"]
    for r in rs:
        acc, audit = r["accounting"], r["audit"]
        views = audit.get("views", {})
        claimed = fmt_eps(audit.get("claimed", {}).get("epsilon")) if audit else "-"
        large = r["audit_large"]
        big = large.get("views", {})
        big_claim = fmt_eps(large.get("claimed", {}).get("epsilon")) if large else "-"
        lines.append(f"| {r['method']} | {r['m']} | {sigma_text(r['sigma'])} | {fmt_eps(acc.get('epsilon'))} | "
                     f"{fmt_eps(acc.get('epsilon_every_message'))} | {claimed} | {fmt_audit(views.get('final'))} | "
                     f"{fmt_audit(views.get('rounds'))} | {big_claim} | {fmt_audit(big.get('final'))} | "
                     f"{fmt_audit(big.get('rounds'))} |")
    return "\n".join(lines)


def color(method: str) -> str:
    return f"C{[*METHODS.values(), *RECIPES.values()].index(method)}"


def figure(rs: list[dict[str, Any]], recon: list[dict[str, Any]], out: Path) -> None:
    """Top: (a) utility, (b) RMIA's TPR at 1% FPR, (c) update inversion against sigma (no DP at
    NO_DP); bottom:
    (d) epsilon (log) against utility: the accountant's (filled) and the audited one (hollow; an
    audited 0 is off the log scale), (e) update inversion against utility, (f) its mean PSNR.
    Solid lines: the membership setting (grid/; dashed there: m = 100); dash-dotted with
    triangles: the reconstruction setting (recon/), which (c), (e) and (f) show."""
    from defences_reconstruction import draw_reconstruction  # a sibling script (it imports this one)

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    (util, mia, inv), (eps, inv_util, psnr) = axes
    series = sorted({(r["method"], r["m"]) for r in rs}, key=lambda s: (color(s[0]), s[1]))
    for method, m in series:
        mine = [r for r in rs if r["method"] == method and r["m"] == m and len(r["accuracy"]) > 1]
        style = {"color": color(method), "ls": "-" if m <= 10 else "--", "marker": "o" if m <= 10 else "s"}
        label = f"{method}, m = {m}"
        xs = [r["sigma"] or NO_DP for r in mine]
        acc = [t_interval(r["accuracy"]) for r in mine]
        util.errorbar(xs, [a[0] for a in acc], yerr=[a[1] for a in acc], capsize=3, label=label, **style)
        pts = [(x, r["membership"]["rmia"]) for x, r in zip(xs, mine) if r["membership"]["rmia"]
               and "tpr_at_1fpr" in r["membership"]["rmia"]["metrics"]]
        if pts:
            y = [100 * v["metrics"]["tpr_at_1fpr"] for _, v in pts]
            err = [[yi - 100 * v["ci"]["tpr_at_1fpr"][0] for yi, (_, v) in zip(y, pts)],
                   [100 * v["ci"]["tpr_at_1fpr"][1] - yi for yi, (_, v) in zip(y, pts)]]
            mia.errorbar([x for x, _ in pts], y, yerr=err, capsize=3, label=label, **style)
        dp = [(a[0], r) for a, r in zip(acc, mine) if r["accounting"].get("epsilon") is not None]
        eps.plot([a for a, _ in dp], [r["accounting"]["epsilon"] for _, r in dp], label=f"{label}: accountant",
                 **style)
        audits = [(a, r["audit_large"] or r["audit"]) for a, r in dp]
        audited = [(a, max(v["epsilon"] for v in au["views"].values())) for a, au in audits if au]
        audited = [(a, e) for a, e in audited if e > 0]
        if audited:
            eps.plot(*zip(*audited), mfc="none", label=f"{label}: audited (best view; 1,000 canaries where run)",
                     **{**style, "ls": ":"})
        for a, r in dp:
            eps.annotate(f"σ={r['sigma']:g}", (a, r["accounting"]["epsilon"]), fontsize=7,
                         textcoords="offset points", xytext=(3, 3))
    draw_reconstruction(recon, util, inv, inv_util, psnr, color, NO_DP)
    mia.axhline(1.0, color="grey", lw=0.8, ls=":", label="chance (TPR = FPR)")
    for ax in (util, mia, inv, psnr):
        ax.set_xscale("log")
        ax.set_xlabel("noise multiplier σ (no DP drawn at 1e-4)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in (inv, psnr):
        ax.set_xlim(util.get_xlim())
    util.set(ylabel="mean local test accuracy (%)", title="(a) utility (95% CI over clients), both settings")
    mia.set(ylabel="RMIA TPR at 1% FPR (%)", title="(b) membership, server's view (pooled victims, 95% CI)")
    eps.set_yscale("log")
    eps.set(xlabel="mean local test accuracy (%)", ylabel="epsilon at δ = 1e-5",
            title="(d) privacy against utility (membership setting)")
    eps.set_ylim(top=1e10)  # room for the legend above the points
    eps.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    from defences_reconstruction import reconstruction_table  # a sibling script (it imports this one)

    rs = rows(root)
    recon = rows(root, "recon") if (root / "recon" / "runs").is_dir() else []
    print(attack_table(rs, recon))
    print()
    print(epsilon_table(rs))
    print()
    print(reconstruction_table(recon))
    for r in rs + recon:
        inv = r["inversion"]
        print(f"- {r['method']} m {r['m']} sigma {sigma_text(r['sigma'])}: training {r['seconds']} s"
              + (f", DIVERGED ({', '.join(r['diverged'][:3])})" if r["diverged"] else "")
              + (f"; inversion s/victim {inv['seconds']}" if inv else "")
              + f"; audit s {r['audit'].get('seconds', '-')} / {r['audit_large'].get('seconds', '-')}")
    figure(rs, recon, out)


if __name__ == "__main__":
    main()
