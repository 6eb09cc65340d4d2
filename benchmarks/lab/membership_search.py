"""Shokri's attack classifiers searched on MNIST-20 (issue #47): chosen on selection victims 0-4,
reported on held-out victims 5-19, paired against the default on the same victims and queries.

    FEDATTACK_DATA=... python benchmarks/lab/membership_search.py run [--out runs/membership-search]
    python -m benchmarks.lab.evidence --write      # docs/membership.md's tables from the evidence

Every cell is `fedattack evaluate runs/bench-audit/mnist-20 --victim V... --attack membership
--threat-model eavesdropper --set KEY=VALUE... --quiet` (one thread, the evaluation seed 0), the
federation of benchmarks/bench_audit.py read as it is (never retrained). The search is the L-BFGS
attack classifiers (`classifier=mlp-lbfgs`) at 50, 100, 200 and 500 iterations with
scikit-learn's L2 penalty (alpha 1e-4), and at 200 iterations with alpha 0.01 and 1, beside the
default of the time (`classifier=mlp`, Adam, 500 epochs). The rule, fixed before any held-out
victim ran: the cheapest L-BFGS configuration (CPU seconds of the membership calls) whose mean AUC
and mean TPR at 1% FPR on the selection victims are at least the Adam MLP's is run on the
held-out victims, with the Adam MLP beside it. Victims the eavesdropper does not observe (never
sampled in a recorded round: 2, 7, 13) give no row. Each row is one victim's metrics and its
membership call's CPU seconds (`extra.cost.measured_cpu_seconds`: the shadow models and the
attack classifiers); the machine's load is recorded beside them.

`render` (the L-BFGS search) and `render_epochs` (the earlier epochs search, whose evidence
`docs/evidence/membership/epochs-search.json` was written by hand from the same kind of cells)
turn the evidence into docs/membership.md's tables; only the standard library at the top.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "runs" / "bench-audit" / "mnist-20"
KEY = "membership/lbfgs-search"
SELECTION = [str(v) for v in range(0, 5)]
HELD_OUT = [str(v) for v in range(5, 20)]
DEFAULT = {"classifier": "mlp"}  # the default when the search ran: Adam, 500 epochs
SEARCH = [{"classifier": "mlp-lbfgs", "iterations": 50, "alpha": 1e-4},
          {"classifier": "mlp-lbfgs", "iterations": 100, "alpha": 1e-4},
          {"classifier": "mlp-lbfgs", "iterations": 200, "alpha": 1e-4},
          {"classifier": "mlp-lbfgs", "iterations": 500, "alpha": 1e-4},
          {"classifier": "mlp-lbfgs", "iterations": 200, "alpha": 1e-2},
          {"classifier": "mlp-lbfgs", "iterations": 200, "alpha": 1.0}]
METRICS = ("auc", "accuracy", "tpr_at_1fpr")
# Student's t 0.975 quantiles, 1 to 20 degrees of freedom (a paired t interval without scipy)
T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860)


def cell_name(settings: dict[str, Any], split: str) -> str:
    parts = [str(settings["classifier"])] + [f"{k}={settings[k]:g}" for k in ("iterations", "alpha") if k in settings]
    return f"{split}:" + ",".join(parts)


def evaluate(settings: dict[str, Any], victims: list[str], out: Path) -> list[dict[str, Any]]:
    """One cell: the membership calls of `victims` with `settings`; a row per observed victim."""
    command = [str(Path(sys.executable).parent / "fedattack"), "evaluate", str(RUN), "--attack", "membership",
               "--threat-model", "eavesdropper", "--quiet", "--out", str(out), "--threads", "1"]
    command += [a for v in victims for a in ("--victim", v)]
    command += [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    if out.is_dir() and any(out.iterdir()):
        command.append("--resume")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()[-1500:]}")
    rows = []
    for v in victims:
        found = sorted(out.glob(f"membership-eavesdropper-*-victim{v}.json"))
        result = json.loads(found[0].read_text())
        if not result["applicable"]:
            continue
        rows.append({"victim": int(v), **{m: round(result["metrics"][m], 5) for m in METRICS},
                     "cpu_s": round(result["extra"]["cost"]["measured_cpu_seconds"], 2)})
    return rows


def cells_of(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    cells: dict[str, list[dict[str, Any]]] = {}
    for row in data["rows"]:
        cells.setdefault(row["cell"], []).append(row)
    return cells


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.mean(r[key] for r in rows)


def chosen(data: dict[str, Any]) -> str | None:
    """The rule: the cheapest L-BFGS cell of the selection victims at least the default's mean
    AUC and mean TPR at 1% FPR."""
    cells = cells_of(data)
    base = cells[cell_name(DEFAULT, "selection")]
    fit = [name for name, rows in cells.items() if name.startswith("selection:mlp-lbfgs")
           and mean(rows, "auc") >= mean(base, "auc") and mean(rows, "tpr_at_1fpr") >= mean(base, "tpr_at_1fpr")]
    return min(fit, key=lambda name: sum(r["cpu_s"] for r in cells[name])) if fit else None


def paired(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str) -> tuple[float, float, float, int]:
    """Mean of a - b over the victims both have, with its paired t 95% interval, and n."""
    bv = {r["victim"]: r[key] for r in b}
    diffs = [r[key] - bv[r["victim"]] for r in a if r["victim"] in bv]
    m = statistics.mean(diffs)
    half = T975[len(diffs) - 2] * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return m, m - half, m + half, len(diffs)


def label(name: str) -> tuple[str, str, str, str]:
    split, _, rest = name.partition(":")
    parts = rest.split(",")
    opts = dict(p.split("=") for p in parts[1:])
    victims = "selection 0-4" if split == "selection" else "held-out 5-19"
    if parts[0] == "mlp":
        return victims, "mlp (Adam)", "500 epochs", "1e-04"
    return victims, "mlp-lbfgs", f"{opts['iterations']} iterations", f"{float(opts['alpha']):.0e}"


def render(data: dict[str, Any]) -> str:
    cells = cells_of(data)
    header = ["victims", "attack classifiers", "fit", "alpha", "n", "AUC", "balanced accuracy",
              "TPR @ 1% FPR", "CPU s (membership calls)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, rows in cells.items():
        mark = " (chosen)" if name == data["chosen"] else ""
        victims, kind, fit, alpha = label(name)
        lines.append(f"| {victims} | {kind}{mark} | {fit} | {alpha} | {len(rows)} | {mean(rows, 'auc'):.3f} | "
                     f"{mean(rows, 'accuracy'):.3f} | {100 * mean(rows, 'tpr_at_1fpr'):.1f}% | "
                     f"{sum(r['cpu_s'] for r in rows):.1f} |")
    if data["chosen"]:
        new = cells[data["chosen"].replace("selection:", "held-out:")]
        old = cells[cell_name(DEFAULT, "held-out")]
        d = {k: paired(new, old, k) for k in METRICS}
        scale = {"auc": 1.0, "accuracy": 1.0, "tpr_at_1fpr": 100.0}
        digits = {"auc": 3, "accuracy": 3, "tpr_at_1fpr": 2}
        cell = {k: f"{scale[k] * d[k][0]:+.{digits[k]}f} [{scale[k] * d[k][1]:+.{digits[k]}f}, "
                   f"{scale[k] * d[k][2]:+.{digits[k]}f}]" for k in METRICS}
        ratio = sum(r["cpu_s"] for r in new) / sum(r["cpu_s"] for r in old)
        lines.append(f"| held-out 5-19, paired (t, 95%) | chosen - mlp (Adam) |  |  | {d['auc'][3]} | {cell['auc']} | "
                     f"{cell['accuracy']} | {cell['tpr_at_1fpr']} pts | {ratio:.2f}x |")
    return "\n".join(lines)


def render_epochs(data: dict[str, Any]) -> str:
    """The epochs search (its evidence keeps per-victim metrics only, no CPU seconds)."""
    header = ["victims", "epochs", "n", "AUC", "balanced accuracy", "TPR @ 1% FPR"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    order = sorted(data["cells"], key=lambda c: (c.split("-")[1] != "sel", -int(c.split("-")[2])))
    for name in order:
        rows = list(data["cells"][name].values())
        victims = "selection 0-4" if "-sel-" in name else "held-out 5-19"
        lines.append(f"| {victims} | {name.split('-')[2]} | {len(rows)} | {mean(rows, 'auc'):.3f} | "
                     f"{mean(rows, 'accuracy'):.3f} | {100 * mean(rows, 'tpr_at_1fpr'):.1f}% |")
    new = [{"victim": int(v), **r} for v, r in data["cells"]["ep-rep-50"].items()]
    old = [{"victim": int(v), **r} for v, r in data["cells"]["ep-rep-500"].items()]
    d = {k: paired(new, old, k) for k in METRICS}
    lines.append(f"| held-out 5-19, paired (t, 95%) | 50 - 500 | {d['auc'][3]} | "
                 f"{d['auc'][0]:+.3f} [{d['auc'][1]:+.3f}, {d['auc'][2]:+.3f}] | "
                 f"{d['accuracy'][0]:+.3f} [{d['accuracy'][1]:+.3f}, {d['accuracy'][2]:+.3f}] | "
                 f"{100 * d['tpr_at_1fpr'][0]:+.2f} [{100 * d['tpr_at_1fpr'][1]:+.2f}, "
                 f"{100 * d['tpr_at_1fpr'][2]:+.2f}] pts |")
    return "\n".join(lines)


def run(out: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab import evidence

    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()[0]]

    def cell(settings: dict[str, Any], split: str, victims: list[str]) -> None:
        name = cell_name(settings, split)
        found = evaluate(settings, victims, out / name.replace(":", "-").replace(",", "-"))
        rows.extend({"cell": name, **r} for r in found)
        print(f"{name}: n={len(found)} auc {statistics.mean(r['auc'] for r in found):.4f} tpr1 "
              f"{statistics.mean(r['tpr_at_1fpr'] for r in found):.4f} cpu {sum(r['cpu_s'] for r in found):.1f}",
              flush=True)

    for settings in [DEFAULT, *SEARCH]:
        cell(settings, "selection", SELECTION)
    pick = chosen({"rows": rows})
    print(f"chosen on the selection victims: {pick}", flush=True)
    if pick:
        settings = next(s for s in SEARCH if cell_name(s, "selection") == pick)
        cell(DEFAULT, "held-out", HELD_OUT)
        cell(settings, "held-out", HELD_OUT)
    load.append(os.getloadavg()[0])
    return evidence.save(
        KEY, "benchmarks/lab/membership_search.py:render", rows, chosen=pick,
        what="issue #47: Shokri's membership (`membership`) with L-BFGS attack classifiers (classifier=mlp-lbfgs) "
             "against the Adam MLP (classifier=mlp, 500 epochs), MNIST-20 (runs/bench-audit/mnist-20), eavesdropper, "
             "one thread, evaluation seed 0; selection victims 0-4, held-out victims 5-19 (victims the "
             "eavesdropper does not observe are absent)",
        commands="fedattack evaluate runs/bench-audit/mnist-20 --victim V... --attack membership "
                 "--threat-model eavesdropper --set classifier=C [--set iterations=I --set alpha=A] "
                 "--threads 1 --quiet",
        rule="the cheapest mlp-lbfgs cell (CPU s of the membership calls) whose mean AUC and mean TPR at 1% FPR on "
             "the selection victims are at least mlp's runs on the held-out victims, beside mlp",
        load_average=[round(x, 2) for x in load], cpus=os.cpu_count())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="run the search's cells and write the evidence")
    go.add_argument("--out", type=Path, default=ROOT / "runs" / "membership-search")
    args = parser.parse_args()
    print(f"wrote {run(args.out)}")


if __name__ == "__main__":
    main()
