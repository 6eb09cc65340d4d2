"""A sweep of 8 digits federations: one after another, on the local backend, on a local Ray.

    flock /work/bench.lock .venv/bin/python benchmarks/bench_sweep.py --workers 2 --json sweep.json

The sweep is 4 methods x 2 seeds of the quickstart's federation (digits, 10 clients, all of
them every round, E = 1, B = 10, batched executor), each a few seconds of training at 50 rounds
(`--rounds 50 400` times it with short and with longer cells). Every backend runs it from an
empty output folder in this one process, in turn: `sequential` (this process, one cell after
another: what `fedattack experiment run` did before backends), `local` (this process and
`--workers` - 1 spawned worker processes, kept for the whole run and handed cells as they free
up, cores // workers torch threads each) and `ray` (a local Ray instance of `--workers` CPUs
started for the run and shut down after it). An untimed one-round run first imports torch and
fedattack and loads digits in this process, as the command has done by the time it plans. A
cell's time is its wall time where it ran; a backend's total includes starting its workers
(imports of torch and fedattack in each new process) and, for Ray, starting and stopping the
instance. The run directories of the backends are then compared file by file (everything but
the manifest, which holds wall times): the table says whether they are bit-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from fedattack.experiments.backends import make_backend
from fedattack.experiments.runner import run_experiment
from fedattack.experiments.spec import parse
from fedattack.registry import UserError

SWEEP = {
    "name": "bench-sweep",
    "federation": [{"methods": ["fedavg", "fedprox", "fedper", "scaffold"], "dataset": "digits",
                    "model": "digits-mlp", "partition": "shards", "clients": 10, "rounds": 0, "fraction": 1.0,
                    "epochs": 1, "batch-size": 10, "lr": 0.1, "record": "final-per-client", "executor": "batched",
                    "grid": {"seeds": [0, 1]}}],
}


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def run(backend: str, workers: int, rounds: int, out: Path) -> dict[str, Any]:
    data = json.loads(json.dumps(SWEEP))
    data["federation"][0]["rounds"] = rounds
    cells: list[float] = []

    def note(line: str) -> None:
        if line.endswith("s") and ": " in line:
            cells.append(float(line.rsplit(": ", 1)[1][:-1]))

    before = load()
    started = time.perf_counter()
    try:
        summary = run_experiment(parse(data), out, evaluate=None, report=None, echo=note, progress=False,
                                 backend=make_backend(backend, None if backend == "sequential" else workers))
    except UserError as exc:  # e.g. a Ray that does not start on an overloaded machine: say so, go on
        print(f"{backend}: {exc}", flush=True)
        return {"backend": backend, "failed": str(exc), "load_before": before, "load_after": load()}
    seconds = time.perf_counter() - started
    assert summary.trained == 8, summary
    row = {"backend": backend, "seconds": round(seconds, 2), "cell_seconds": round(sum(cells), 2),
           "load_before": before, "load_after": load()}
    print(json.dumps(row), flush=True)
    return row


def digests(out: Path) -> dict[str, str]:
    return {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted((out / "runs").rglob("*")) if f.is_file() and f.name != "federation.json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, nargs="+", default=[50], help="one table per value")
    parser.add_argument("--backends", nargs="+", default=["sequential", "local", "ray"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as `fedattack experiment run` sets in its own process
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")  # Ray's 60 s is too short under load
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    tables = {}
    try:
        run("sequential", 1, 1, root / "warm-up")  # imports and the digits cache, untimed
        for rounds in args.rounds:
            rows = [run(name, args.workers, rounds, root / f"{name}-{rounds}") for name in args.backends]
            reference = digests(root / f"{args.backends[0]}-{rounds}")
            for row in rows:
                row["identical"] = "failed" not in row and digests(root / f"{row['backend']}-{rounds}") == reference
            tables[rounds] = rows
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for rounds, rows in tables.items():
        table(rows, rounds, args.workers)
    if args.json:
        args.json.write_text(json.dumps({str(r): rows for r, rows in tables.items()}, indent=1))


def table(rows: list[dict[str, Any]], rounds: int, workers: int) -> None:
    base = rows[0]["seconds"]
    print(f"8 digits federations ({rounds} rounds each), {workers} workers, "
          f"{os.cpu_count()} cores, torch {torch.__version__}")
    print("| backend | seconds | speed-up vs one after another | sum of cell times | bit-identical "
          "| load before/after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        if "failed" in row:
            print(f"| {row['backend']} | failed: {row['failed']} | | | | {row['load_before']} / {row['load_after']} |")
            continue
        print(f"| {row['backend']} | {row['seconds']:.1f} | {base / row['seconds']:.2f}x | "
              f"{row['cell_seconds']:.1f} | {'yes' if row['identical'] else 'NO'} | "
              f"{row['load_before']} / {row['load_after']} |")


if __name__ == "__main__":
    main()
