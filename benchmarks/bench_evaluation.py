"""The evaluation phase of the quickstart's privacy experiment, before and after.

    flock /work/bench.lock .venv/bin/python benchmarks/bench_evaluation.py --workers 2 --json evaluation.json

The experiment is `quick-digits` (what `fedattack quickstart` runs): 5 federations on digits
(FedAvg, FedProx, WAFFLe, FedPer, SCAFFOLD; 10 clients, 50 rounds), each attacked by an
eavesdropper and the oracle with membership inference (3 shadow models) and model inversion
(300 steps) on 5 random victims: 5 evaluation cells of 2 x 2 x 5 attacks. Its federations are
trained once, untimed; then its evaluation phase runs from scratch on them in each
configuration, in this one process, in turn (`--configs`; by default the first and the last):

- **before**: what `fedattack experiment run` did before this work: the cells one after
  another (`--backend sequential`), each victim's shadow models trained one at a time (the
  `sequential` executor, still the default of an [[evaluation]] entry);
- the cells on the local backend (`--workers` at once, this process one of them), shadow
  models one at a time;
- the cells one after another, shadow models through the `batched` executor (`executor =
  "batched"` in the [[evaluation]] entry);
- **after**: the local backend and the batched executor.

A configuration's time is the whole phase's wall time, workers' start-up included; "cells" is
the sum of the cells' own wall times. Results are compared between backends of the same
executor (every metric of every result file; the time fields differ): the table says whether
they are identical. `--victims`, `--steps` and `--methods` shrink the setting for a quick check.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import torch

from fedattack.commands.experiment_cmd import make_evaluator
from fedattack.experiments import resolve
from fedattack.experiments.backends import make_backend
from fedattack.experiments.runner import run_experiment
from fedattack.experiments.spec import parse

CONFIGS = {"before": ("sequential", "sequential"), "local": ("local", "sequential"),
           "batched": ("sequential", "batched"), "after": ("local", "batched")}


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def experiment(args: argparse.Namespace, executor: str | None, evaluations: bool = True) -> Any:
    source = resolve("quick-digits").source
    assert source is not None
    data = tomllib.loads(source.read_text(encoding="utf-8"))
    if args.methods:
        data["federation"][0]["methods"] = args.methods
    ev = data["evaluation"][0]
    ev["victims"] = [f"random:{args.victims}"]
    ev["settings"]["steps"] = args.steps
    if executor is not None:
        ev["executor"] = executor
    if not evaluations:
        del data["evaluation"]
    return parse(data)


def train(args: argparse.Namespace, out: Path) -> None:
    run_experiment(experiment(args, None, evaluations=False), out, evaluate=None, report=None,
                   echo=lambda _: None, progress=False, backend=make_backend("local", args.workers))


def evaluate(args: argparse.Namespace, name: str, trained: Path, out: Path) -> dict[str, Any]:
    backend, executor = CONFIGS[name]
    shutil.copytree(trained / "runs", out / "runs")
    cells: list[float] = []

    def note(line: str) -> None:
        if line.startswith("[attack") and line.endswith("s"):
            cells.append(float(line.rsplit(": ", 1)[1][:-1]))

    before = load()
    started = time.perf_counter()
    summary = run_experiment(experiment(args, executor), out, evaluate=make_evaluator(args.data_root, False),
                             report=None, echo=note, progress=False,
                             backend=make_backend(backend, None if backend == "sequential" else args.workers))
    seconds = time.perf_counter() - started
    assert summary.trained == 0 and summary.evaluated == len(cells) > 0, summary
    row = {"config": name, "backend": backend, "executor": executor, "seconds": round(seconds, 2),
           "cells": len(cells), "cell_seconds": round(sum(cells), 2), "load_before": before, "load_after": load()}
    print(json.dumps(row), flush=True)
    return row


def metrics(out: Path) -> dict[str, str]:
    """Every result's numbers (and whether it applied), by file, as JSON text (NaN equals NaN
    there); times left out."""
    found = {}
    for path in sorted((out / "results").rglob("*.json")):
        if path.name in ("summary.json", "cell.json"):
            continue
        data = json.loads(path.read_text())
        numbers = {k: data.get(k) for k in ("applicable", "metrics", "curves", "baselines")}
        found[str(path.relative_to(out))] = json.dumps(numbers, sort_keys=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--configs", nargs="+", default=["before", "after"], choices=list(CONFIGS),
                        help="[default: before after; all four attribute the gain to the backend and the executor]")
    parser.add_argument("--victims", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300, help="model inversion's steps")
    parser.add_argument("--methods", nargs="+", default=None, help="[default: the experiment's five]")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as `fedattack experiment run` sets in its own process
    root = Path(tempfile.mkdtemp(prefix="bench-evaluation-"))
    try:
        train(args, root / "trained")
        rows = [evaluate(args, name, root / "trained", root / name) for name in args.configs]
        found = {row["config"]: metrics(root / row["config"]) for row in rows}
        for row in rows:
            same = [r for r in rows if r["executor"] == row["executor"]]
            row["identical"] = all(found[r["config"]] == found[row["config"]] for r in same)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = rows[0]["seconds"]
    print(f"quick-digits evaluation phase: {rows[0]['cells']} cells, {args.victims} victims, inversion "
          f"{args.steps} steps, {args.workers} workers, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"python {sys.version.split()[0]}")
    print("| configuration | backend | shadow models | seconds | speed-up vs the first row | sum of cell times "
          "| results identical across backends | load before/after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['config']} | {row['backend']} | {row['executor']} | {row['seconds']:.1f} | "
              f"{base / row['seconds']:.2f}x | {row['cell_seconds']:.1f} | {'yes' if row['identical'] else 'NO'} | "
              f"{row['load_before']} / {row['load_after']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
