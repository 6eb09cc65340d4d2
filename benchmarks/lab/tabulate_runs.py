"""Tabulate finished run directories for docs/lab/reproduction.md: one row per run, or per setting.

A reproduction table is only as good as the path from the run to the cell, so every figure on
that page is printed by this script from the runs' own `federation.json` and `metrics.json`
(never copied by hand):

    python benchmarks/lab/tabulate_runs.py RUN_DIR...            # one row per run
    python benchmarks/lab/tabulate_runs.py --by-setting RUN_DIR...  # mean ± std over seeds
    python benchmarks/lab/tabulate_runs.py --by-setting --experiment E.toml --out DIR  # its runs, in order
    python benchmarks/lab/tabulate_runs.py --client 0 RUN_DIR...  # one client's best / last accuracy

Columns: round-final mean local test accuracy, the multimodal majority / minority / gap, the
mean over the last three evaluated rounds, WAFFLe's selection health from the manifest's
`method_summary` (mean |pi - prior|, between-client std of pi, distinct factor sets, each
per group when the partition has two; and from the private states, how far the two groups'
mean selections are apart), and the wall time. A setting is everything in the spec
but the seed, so runs of one setting over several seeds are pooled (std with ddof = 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

SETTING_KEYS = ("method", "dataset", "partition", "rounds", "normalize")


def load(run: Path, at_round: int | None = None) -> dict[str, Any]:
    """The figures of one run directory, flat (accuracies of round `at_round` if given)."""
    manifest = json.loads((run / "federation.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    spec = manifest["spec"]
    final = metrics["final"]
    if at_round is not None:
        from fedattack.metrics import utility_summary
        groups = json.loads((run / "partition.json").read_text()).get("groups", [])
        accs = next(r["accuracy"] for r in metrics["rounds"] if r["round"] == at_round)
        final = utility_summary(accs, groups)
    last3 = [_mean(r["accuracy"]) for r in metrics["rounds"][-3:]]
    row: dict[str, Any] = {"run": run.name, "seed": spec.get("seed", 0), "seconds": manifest.get("seconds"),
                           "setting": setting(spec), "mean": final["mean"], "last3": statistics.fmean(last3),
                           "variance": final["variance"]}
    for key in ("majority", "minority", "gap"):
        row[key] = final.get(key)
    row.update(health(manifest.get("method_summary", {})))
    row["group_gap"] = group_gap(run)
    return row


def group_gap(run: Path) -> float | None:
    """Mean over factors of |minority's mean pi - majority's mean pi| (first factorised layer).

    The manifest's health says how much clients differ; this says whether the two
    subpopulations of a multimodal partition select differently, which personalisation needs."""
    groups = json.loads((run / "partition.json").read_text()).get("groups", [])
    if {"majority", "minority"} - set(groups) or not (run / "private.pt").exists():
        return None
    private = torch.load(run / "private.pt", weights_only=True)
    logits = {k.split("/")[0]: v for k, v in private.items() if k.endswith(".pi_logit")}
    if not logits:
        return None
    layer = next(k.split("/")[1] for k in private if k.endswith(".pi_logit"))
    pis = {g: [torch.sigmoid(private[f"client{k}/{layer}"]) for k, gk in enumerate(groups)
               if gk == g and f"client{k}/{layer}" in private] for g in ("majority", "minority")}
    mean = {g: torch.stack(v).mean(0) for g, v in pis.items()}
    return float((mean["minority"] - mean["majority"]).abs().mean())


def setting(spec: dict[str, Any]) -> str:
    """What defines the federation besides its seed and the paper's fixed recipe, as table cells."""
    cells = [str(spec.get(k, "none" if k == "normalize" else "")) for k in SETTING_KEYS]
    hyper = spec.get("hyper", {})
    cells.append(", ".join(f"{k}={_value(v)}" for k, v in hyper.items()) or "(defaults)")
    return " | ".join(cells)


def _value(value: Any) -> str:
    """A setting's value as one text whether it came from the CLI ("1") or a TOML file (1.0),
    so runs of the same setting pool over seeds however they were started."""
    if isinstance(value, bool):
        return str(value).lower()
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def health(summary: dict[str, Any]) -> dict[str, Any]:
    """The first factorised layer's selection health: all clients, and per group if any."""
    layers = summary.get("selection_health", {}).get("layers", {})
    if not layers:
        return {}
    entry = next(iter(layers.values()))
    out = {"moved": entry["all"]["mean_abs_from_prior"], "spread": entry["all"]["between_client_std"],
           "sets": entry["all"]["distinct_factor_sets"], "clients": entry["all"]["clients"],
           "active": entry["all"]["active_factors_mean"]}
    for group, h in entry.get("groups", {}).items():
        out[f"{group}.moved"] = h["mean_abs_from_prior"]
        out[f"{group}.spread"] = h["between_client_std"]
        out[f"{group}.sets"] = f"{h['distinct_factor_sets']}/{h['clients']}"
    return out


def _mean(accs: list[float | None]) -> float:
    vals = [a for a in accs if a is not None]
    return 100.0 * statistics.fmean(vals)


def fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1 else f"{value:.2f}"
    return str(value)


def per_run(rows: list[dict[str, Any]]) -> str:
    cols = ["run", "seed", "mean", "majority", "minority", "gap", "last3", "moved", "spread", "sets",
            "majority.moved", "majority.spread", "majority.sets", "minority.moved", "minority.spread",
            "minority.sets", "seconds"]
    cols = [c for c in cols if any(r.get(c) is not None for r in rows)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def by_setting(rows: list[dict[str, Any]]) -> str:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["setting"], []).append(r)
    lines = ["| method | dataset | partition | rounds | inputs | hyperparameters | seeds | per seed | mean | "
             "majority | minority | gap | variance | moved | spread | minority: moved, spread | "
             "distinct factor sets / clients | pi, minority - majority | wall s |", "|" + "---|" * 19]
    for name, rs in groups.items():
        seeds = ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"]))
        rs = sorted(rs, key=lambda r: r["seed"])
        cells = [", ".join(f"{r['mean']:.2f}" for r in rs)]
        cells += [_pm([r.get(k) for r in rs]) for k in ("mean", "majority", "minority", "gap")]
        cells.append(_pm([r.get("variance") for r in rs], 0))
        cells += [_pm([r.get(k) for r in rs], 4) for k in ("moved", "spread")]
        cells.append(", ".join(_pm([r.get(k) for r in rs], 4) for k in ("minority.moved", "minority.spread"))
                     if any(r.get("minority.moved") is not None for r in rs) else "")
        cells.append(", ".join(f"{r['sets']}/{r['clients']}" for r in rs if r.get("sets") is not None))
        cells.append(_pm([r.get("group_gap") for r in rs], 4))
        cells.append(", ".join(f"{r['seconds']:.0f}" for r in rs if r.get("seconds") is not None))
        lines.append(f"| {name} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def one_client(runs: list[Path], client: int) -> str:
    """Per run: the client's accuracy at its best evaluated round and at the last, and when."""
    lines = ["| run | hyperparameters | best (round) | last | diverged |", "|---|---|---|---|---|"]
    for run in runs:
        manifest = json.loads((run / "federation.json").read_text())
        hist = [(r["round"], r["accuracy"][client]) for r in
                json.loads((run / "metrics.json").read_text())["rounds"]]
        best = max(hist, key=lambda h: -1.0 if h[1] is None else h[1])
        hyper = ", ".join(f"{k}={v}" for k, v in manifest["spec"].get("hyper", {}).items())
        lines.append(f"| {run.name} | {hyper} | {100 * best[1]:.1f} ({best[0]}) | {100 * hist[-1][1]:.1f} | "
                     f"{'yes' if manifest.get('diverged') else 'no'} |")
    return "\n".join(lines)


def _pm(values: list[Any], digits: int = 2) -> str:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return ""
    return f"{statistics.fmean(vals):.{digits}f} ± {statistics.pstdev(vals):.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--experiment", type=Path, help="with --out: its runs, in the file's order")
    parser.add_argument("--out", type=Path, help="the experiment's output folder")
    parser.add_argument("--by-setting", action="store_true", help="pool seeds: mean ± std per setting")
    parser.add_argument("--at-round", type=int, help="accuracies of this evaluated round, not the last")
    parser.add_argument("--client", type=int, help="one client's best / last evaluated accuracy per run "
                                                   "(WAFFLE's Alice is client 0)")
    args = parser.parse_args()
    runs = list(args.runs)
    if args.experiment is not None:
        from fedattack.experiments.plan import plan
        from fedattack.experiments.runner import run_dir
        from fedattack.experiments.spec import load as load_experiment
        runs += [run_dir(args.out, f) for f in plan(load_experiment(args.experiment)).federations]
    runs = [r for r in runs if (r / "federation.json").exists()]
    if args.client is not None:
        print(one_client(runs, args.client))
        return
    rows = [load(r, args.at_round) for r in runs]
    print(by_setting(rows) if args.by_setting else per_run(rows))


if __name__ == "__main__":
    main()
