"""Which executor should `fedattack train` use by default: every executor on every method, timed.

    FEDATTACK_DATA=/work/shared/datasets flock -x /work/locks/quiet.lock \\
        .venv/bin/python benchmarks/bench_default_executor.py --repeat 3

The default is the fastest executor that matches the sequential reference within the
documented tolerance (docs/architecture.md, "Determinism and disk"; the test suite holds
`batched` to it for every registered method, tests/core/test_batched_executor.py, and
`batched-native` to `batched`). Each run trains one federation through `train_federation` (the
whole command: training, evaluation of every client every round, the run directory) in the
quickstart's setting (`quick-digits`: the embedded digits, 10 clients all in every round, one
local epoch, batch 10) for `--rounds` rounds, every registered method, and WAFFLe and FedAvg in
the WAFFLe paper's MNIST setting (100 clients, 10 a round, E = 5, B = 10) when the data is
there. Executors alternate within each repeat, in a rotating order, each federation in a fresh
process (so a compiled library or a warm cache is paid as a user pays it); the table gives each
executor's median wall seconds and its ratio to `sequential` measured in the same repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def settings(rounds: int, mnist: bool) -> dict[str, dict[str, Any]]:
    from fedattack.registry import TARGETS

    quick = {"dataset": "digits", "partition": "shards", "num_clients": 10, "fraction": 1.0, "model": "digits-mlp",
             "recipe": {"epochs": 1, "batch_size": 10, "lr": 0.05}}
    out = {f"{m} (quick-digits)": {**quick, "method": m} for m in TARGETS.names()}
    if mnist:
        paper = {"dataset": "mnist", "partition": "shards", "num_clients": 100, "fraction": 0.1, "model": "mnist-mlp",
                 "recipe": {"epochs": 5, "batch_size": 10, "lr": 0.04}}
        out.update({f"{m} (MNIST, WAFFLe paper)": {**paper, "method": m} for m in ("fedavg", "waffle-ibp")})
    return {k: {**v, "rounds": rounds if "digits" in k else max(1, rounds // 5), "record": "none", "seed": 0}
            for k, v in out.items()}


def child(spec: dict[str, Any]) -> float:
    """Train one federation in this process; the wall seconds of `train_federation`."""
    from fedattack.federation.spec import FederationSpec
    from fedattack.federation.train import train_federation
    from fedattack.target import Recipe

    spec = {**spec, "recipe": Recipe(**spec["recipe"])}
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        train_federation(FederationSpec(**spec), Path(folder) / "run", progress=False)
        return time.perf_counter() - started


def measure(spec: dict[str, Any]) -> float:
    code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench_default_executor import child; " \
           f"print(child(json.loads({json.dumps(json.dumps(spec))})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{spec}: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="settings whose name contains this")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    from fedattack.federation.executors import EXECUTORS

    executors = EXECUTORS.names()
    data = os.environ.get("FEDATTACK_DATA")
    cases = {k: v for k, v in settings(args.rounds, bool(data and Path(data, "MNIST").is_dir())).items()
             if args.only in k}
    seconds: dict[str, dict[str, list[float]]] = {k: {e: [] for e in executors} for k in cases}
    for r in range(args.repeat):
        for name, spec in cases.items():
            order = executors[r % len(executors):] + executors[:r % len(executors)]
            for executor in order:
                seconds[name][executor].append(measure({**spec, "executor": executor}))
            print(f"repeat {r + 1}: {name}: " + ", ".join(f"{e} {seconds[name][e][-1]:.1f}s" for e in executors),
                  flush=True)
    load = os.getloadavg()
    print(f"\nmedian wall seconds of `train_federation` over {args.repeat} repeats, {args.rounds} rounds "
          f"(MNIST: {max(1, args.rounds // 5)}); load average at the end {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    print("| setting | " + " | ".join(executors) + " | fastest |")
    print("| --- |" + " --- |" * (len(executors) + 1))
    for name in cases:
        med = {e: statistics.median(seconds[name][e]) for e in executors}
        ref = med.get("sequential", 1.0)
        cells = [f"{med[e]:.1f} s ({ref / med[e]:.2f}x)" for e in executors]
        print(f"| {name} | " + " | ".join(cells) + f" | {min(med, key=med.__getitem__)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": seconds, "load": load, "rounds": args.rounds}, indent=1))


if __name__ == "__main__":
    main()
