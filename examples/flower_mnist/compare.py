"""Put two evaluations of one setting side by side: do the attacks see the same federation?

    python examples/flower_mnist/compare.py results/fedavg-own results/fedavg-flower \
        --runs runs/fedavg-own runs/fedavg-flower --names fedattack Flower

For every attack and metric: each evaluation's mean over its victims with a 95% bootstrap
interval over victims (`fedattack.intervals`, the report's own), and the difference
paired victim by victim (the same client holds the same data in both). The two agree on a
metric when that paired interval contains 0. Each victim's own interval over its queries
(members and non-members resampled separately) is in its result file, `extra.membership.ci`.
With `--runs`, the two federations' final models are also scored on the whole test split.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mnist_task, which the runs name

from fedattack.intervals import Interval, difference_interval, mean_interval

METRICS = {"accuracy": "accuracy", "auc": "AUC", "tpr_at_1fpr": "TPR @ 1% FPR"}


def victim_metrics(folder: Path) -> dict[tuple[str, str], dict[int, float]]:
    """(attack, metric) -> victim -> value, from every applicable result file in `folder`."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for file in sorted(folder.glob("*.json")):
        result = json.loads(file.read_text())
        if "attack" not in result or not result.get("applicable"):
            continue  # summary.json, or a result the attack could not produce
        for metric in METRICS:
            if metric in result["metrics"]:
                out.setdefault((result["attack"], metric), {})[int(result["victim"])] = result["metrics"][metric]
    return out


def shown(iv: Interval, scale: float = 1.0) -> str:
    return f"{iv.mean * scale:.3f} [{iv.low * scale:.3f}, {iv.high * scale:.3f}]"


def attack_table(a: Path, b: Path, names: tuple[str, str]) -> list[str]:
    left, right = victim_metrics(a), victim_metrics(b)
    lines = [f"| attack | metric | {names[0]} (n) | {names[1]} (n) | {names[1]} - {names[0]}, paired | agree |",
             "| --- | --- | --- | --- | --- | --- |"]
    for key in sorted(set(left) & set(right)):
        x, y = left[key], right[key]
        diff = difference_interval(y, x).interval
        agree = "yes" if diff.low <= 0 <= diff.high else "no"
        lines.append(f"| {key[0]} | {METRICS[key[1]]} | {shown(mean_interval(list(x.values())))} ({len(x)}) "
                     f"| {shown(mean_interval(list(y.values())))} ({len(y)}) | {shown(diff)} | {agree} |")
    return lines


def test_accuracy(run: Path, data_root: Path | None) -> tuple[float, float]:
    """The final model's accuracy on the whole test split, and the mean over clients' local tests (%)."""
    from fedattack.data import load_dataset
    from fedattack.federation.rundir import Federation
    from fedattack.interop import plugins
    fed = Federation(run)
    for kind, name in (("model", fed.spec.model), ("dataset", fed.spec.dataset)):
        if plugins.is_import_path(name):  # this folder's mnist_task: named on purpose, imported here
            (plugins.register_model if kind == "model" else plugins.register_dataset)(name)
    target, data = fed.target(), load_dataset(fed.spec.dataset, data_root)
    params = target.deployed(fed.server_state(), {})
    with torch.no_grad():
        correct = (target.forward(params, data.x_test).argmax(1) == data.y_test).float().mean()
    return 100.0 * float(correct), float(fed.manifest["utility"]["mean"])


def wire_differences(a: Path, b: Path) -> list[str]:
    """Round by round, the largest |difference| between the two runs' downlinks and uplinks."""
    from fedattack.federation.rundir import Federation
    fa, fb = Federation(a), Federation(b)
    msgs = [{(m.round, m.kind, m.client): m.payload for m in f.transcript().load()} for f in (fa, fb)]
    lines = ["| round | max abs diff, downlinks | max abs diff, uplinks | bit-identical uplinks |",
             "| --- | --- | --- | --- |"]
    for rnd in sorted({k[0] for k in msgs[0]} & {k[0] for k in msgs[1]}):
        row = []
        for kind in ("downlink", "uplink"):
            keys = [k for k in msgs[0] if k[0] == rnd and k[1] == kind and k in msgs[1]]
            diffs = [float((msgs[0][k][n] - msgs[1][k][n]).abs().max()) for k in keys for n in msgs[0][k]]
            same = sum(all(torch.equal(msgs[0][k][n], msgs[1][k][n]) for n in msgs[0][k]) for k in keys)
            row.append((max(diffs, default=float("nan")), f"{same}/{len(keys)}"))
        lines.append(f"| {rnd} | {row[0][0]:.3g} | {row[1][0]:.3g} | {row[1][1]} |")
    final = max(float((t - fb.server_state()[n]).abs().max()) for n, t in fa.server_state().items())
    return [*lines, f"\nfinal server models: max abs diff {final:.3g}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path)
    parser.add_argument("--runs", nargs=2, type=Path)
    parser.add_argument("--data-root", type=Path, default=None, help="default: $FEDATTACK_DATA")
    parser.add_argument("--wire", action="store_true", help="compare the --runs' messages round by round")
    parser.add_argument("--names", nargs=2, default=("fedattack", "Flower"))
    args = parser.parse_args()
    names = (args.names[0], args.names[1])
    if len(args.results) == 2:
        print("\n".join(attack_table(args.results[0], args.results[1], names)))
    if args.runs and args.wire:
        print("\n".join(wire_differences(*args.runs)))
    if args.runs and not args.wire:
        print("\n| federation | test-split accuracy (%) | mean local test accuracy (%) |\n| --- | --- | --- |")
        for name, run in zip(names, args.runs):
            whole, local = test_accuracy(run, args.data_root)
            print(f"| {name} | {whole:.2f} | {local:.2f} |")


if __name__ == "__main__":
    main()
