"""WAFFLe's batched step: the hand-written one against the vmap path and the one-at-a-time loop.

    FEDATTACK_DATA=/work/shared/datasets flock /work/bench.lock nice -n 10 \\
        .venv/bin/python benchmarks/bench_waffle.py --json waffle.json

The WAFFLe paper's MNIST setting (MLP 784-200-10 with fc1 factorised, F = 120; 100 clients,
shards; E = 5, B = 10, lr 0.04; `waffle-ibp` with its default, literal recipe, or with
`--recipe personalising` the searched recipe users run: IBP-WF's recipe with Adam on the
selection only, `kl_weight` 0.01, as in `waffle-search-2-heldout.toml`) at 10, 20 and 50
clients a round. Runners, each in its own process (`_measure.py`, as `bench_mnist.py` runs
them), timing `--rounds` rounds after one untimed warm-up round:

- `plain`: one client after another, the target's loss under `torch.optim.SGD` (`_measure.py`;
  literal recipe only: it steps every parameter by SGD);
- `batched-vmap`: the batched executor without hand-written steps (`BatchedExecutor(fast=False)`):
  every step `vmap(grad(local_loss))`, which is what WAFFLe ran before its kernel;
- `batched`: the batched executor as `--executor batched` runs it, WAFFLe through its kernel (`targets/waffle/kernel.py`).
- `batched-native`: the same with WAFFLe's factor selection compiled to C (`--executor
  batched-native`, opt-in: `targets/waffle/native.py`).

`--repeat N` measures each client count N times, the runners' order alternating, and prints
each runner's median share with its range and how many reached `--target` (this machine's
timings swing by a third between runs minutes apart, so a single run proves little):

    .venv/bin/python benchmarks/bench_waffle.py --clients 10 --runners batched batched-native \\
        --rounds 6 --full-rounds 0 --repeat 10

Share of the ceiling: matrix-multiply FLOPs per client step (`torch.utils.flop_counter`) x
client steps per second of wall time, over `torch.bmm`'s GFLOP/s at the MNIST MLP's shapes for
that many clients measured in the same run (`bench_mnist.bmm_gflops`, as for FedAvg). Then the
whole setting (10 clients a round, `--full-rounds` rounds, every client evaluated every round,
run directory written) through `train_federation`, before (vmap) and after (hand-written),
with the wall seconds of its parts (`time_phases`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_mnist import bmm_gflops, load  # noqa: E402

METHOD = "waffle-ibp"
RUNNERS = ("plain", "batched-vmap", "batched", "batched-native")
RECIPES: dict[str, dict[str, Any]] = {
    "literal": {},
    "personalising": {"recipe": "ibp-wf", "optimizer": "adam-selection", "adam_lr": 0.03,
                      "r_init_mean": 1.0, "temperature_start": 10.0, "kl_weight": 0.01},
}


def child(cfg: dict[str, Any]) -> dict[str, Any]:
    """One measurement in its own process (this file with --child)."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(cfg)],
                         capture_output=True, text=True, cwd=HERE.parent)
    if out.returncode != 0:
        raise SystemExit(f"measurement {cfg} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_child(cfg: dict[str, Any]) -> dict[str, Any]:
    """In the child: `_measure.measure`, with the vmap-only batched executor registered under
    `batched-vmap` so the whole setting can run it through `train_federation` too."""
    from _measure import measure

    from fedattack.federation.executor_plugins.batched import BatchedExecutor
    from fedattack.federation.executors import EXECUTORS

    class VmapBatched(BatchedExecutor):
        def __init__(self, device: str = "cpu") -> None:
            super().__init__(device, fast=False)

    EXECUTORS.add("batched-vmap", VmapBatched)
    if cfg["runner"] != "full":
        return measure(cfg)
    phases = time_phases()
    res = measure(cfg)
    return {**res, "phases": {k: round(v, 3) for k, v in phases.items()}}


def time_phases() -> dict[str, float]:
    """Wall seconds of the whole setting's parts, summed over calls: loading the data (with the
    registry's imports), training rounds, evaluating every client, writing each round's
    transcript, the manifest's description (partition heterogeneity), sealing the run folder.
    Wraps the functions `train_federation` calls; a second or so of wrapping costs nothing."""
    import time

    import fedattack.federation.train as train
    from fedattack.federation.loop import RoundLoop
    from fedattack.federation.rundir import RunWriter
    from fedattack.federation.transcript_io import TranscriptWriter

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
        return wrapper

    train.load_dataset = timed("load data", train.load_dataset)
    train.describe = timed("describe", train.describe)
    for owner, attr, name in ((RoundLoop, "run_round", "train rounds"), (RoundLoop, "evaluate", "evaluate"),
                              (TranscriptWriter, "end_round", "transcript"), (RunWriter, "finish", "seal")):
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    return spent


def row(m: int, runner: str, res: dict[str, Any], base: dict[str, float], bmm: float) -> str:
    rate = res["steps"] / res["seconds"]
    cpu_rate = res["steps"] / res["cpu_seconds"]
    ratios = "  ".join(f"{rate / base[k]:6.2f}x" if k in base and k != runner else "      -"
                       for k in ("plain", "batched-vmap"))
    return (f"{m:4d}  {runner:13s} {res['seconds'] / res['rounds']:8.2f} {rate:9.0f} {cpu_rate:11.0f}  "
            f"{ratios}  {100 * share(res, bmm):6.1f}%")


def per_round(args: argparse.Namespace, common: dict[str, Any], results: dict[str, Any]) -> None:
    for m in args.clients:
        shares: dict[str, list[float]] = {}
        for repeat in range(args.repeat):
            order = args.runners if repeat % 2 == 0 else args.runners[::-1]  # alternate who runs first
            for runner, value in measure_clients(args, common, results, m, order).items():
                shares.setdefault(runner, []).append(value)
        if args.repeat > 1:
            print(f"\n{m} clients a round, {args.repeat} alternating repeats "
                  "(shares of the higher ceiling measured beside each):")
            for runner, values in shares.items():
                values.sort()
                print(f"  {runner:13s} median {100 * statistics.median(values):5.1f}% (n={len(values)}, "
                      f"{100 * values[0]:.1f}-{100 * values[-1]:.1f}%), "
                      f"{sum(v >= args.target for v in values)} of {len(values)} at or above {100 * args.target:.0f}%")
        results["shares"][m] = shares


def measure_clients(args: argparse.Namespace, common: dict[str, Any], results: dict[str, Any], m: int,
                    runners: list[str]) -> dict[str, float]:
    """One measurement of each runner at m clients, between two of the ceiling; each runner's
    share of the higher ceiling."""
    before = bmm_gflops(m)
    print(f"\n{m} clients a round; torch.bmm at the MLP's shapes: {before:.1f} GFLOP/s; load {load()}")
    print(f"{'m':>4s}  {'runner':13s} {'s/round':>8s} {'steps/s':>9s} {'steps/cpu-s':>11s}  "
          f"{'/plain':>7s}  {'/vmap':>7s}  {'%bmm':>7s}", flush=True)
    base: dict[str, float] = {}
    done = []
    for runner in runners:
        if runner == "plain" and common["hyper"]:
            print(f"{m:4d}  plain          skipped: it steps every parameter by SGD (literal recipe only)")
            continue
        res = child({**common, "runner": runner, "method": METHOD, "clients": m,
                     "rounds": args.rounds, "executor": runner})
        base[runner] = res["steps"] / res["seconds"]
        results["rows"].append({"clients": m, "runner": runner, "load": load(), **res})
        done.append((runner, res))
        print(row(m, runner, res, base, before), flush=True)
    after = bmm_gflops(m)
    results["bmm_gflops"].setdefault(m, []).append([before, after])
    # the ceiling itself swings between measurements (61-170 GFLOP/s idle on the 2-core
    # machines): the shares against the higher of the two, i.e. the smaller shares
    top = max(before, after)
    print(f"torch.bmm again: {after:.1f} GFLOP/s; shares against the higher, {top:.1f}: "
          + ", ".join(f"{r} {100 * share(res, top):.1f}%" for r, res in done), flush=True)
    return {r: share(res, top) for r, res in done}


def share(res: dict[str, Any], bmm: float) -> float:
    """Matrix-product GFLOP/s of the client steps, as a share of `bmm`."""
    return res["steps"] / res["seconds"] * res["flops_per_step"] / 1e9 / bmm


def whole_setting(args: argparse.Namespace, common: dict[str, Any], results: dict[str, Any]) -> None:
    print(f"\nWhole setting: 100 clients, 10 a round, {args.full_rounds} rounds, every client "
          "evaluated every round, run directory written")
    for executor in args.full_executors:
        res = child({**common, "runner": "full", "method": METHOD, "clients": 10,
                     "full_rounds": args.full_rounds, "executor": executor})
        results["full"].append({"executor": executor, "load": load(), **res})
        print(f"  {executor:13s} {res['seconds']:7.1f} s wall, {res['cpu_seconds']:7.1f} s CPU, "
              f"accuracy {res['accuracy']:.2f}%, peak {res['rss_peak'] / 2**20:.0f} MB, "
              f"load {load()}", flush=True)
        phases = res["phases"]
        rest = res["seconds"] - sum(phases.values())
        print("    wall s: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) + f", rest {rest:.1f}",
              flush=True)


def inversion(args: argparse.Namespace, common: dict[str, Any], results: dict[str, Any]) -> None:
    """Model inversion (the WAFFLe paper's Table 4 attack) of `--inversion-victims` victims' deployed
    WAFFLe MNIST models, one victim at a time (`invert`) against all at once (`invert_many`):
    victims per second of wall and CPU time. Every class runs all `--inversion-steps` steps
    (patience above the steps), so both do the same number of steps; the models are the
    initial server with each victim's own initial selection (the speed does not depend on
    training). Each way runs once, untimed, on 2 victims and 2 steps first."""
    import time

    from _measure import spec_for

    from fedattack.attacks.model_inversion.inversion import InversionSettings, invert, invert_many
    from fedattack.data import load_dataset
    from fedattack.federation.train import build_target
    from fedattack.rng import generator

    spec = spec_for({"method": METHOD, "clients": 10, "hyper": common["hyper"]}, 100)
    dataset = load_dataset("mnist", args.data_root)
    target = build_target(spec, dataset, 100)
    server = target.init_server(generator(0, "init"))
    models = [target.deployed(server, target.init_private(k, server, generator(0, "private", k)))
              for k in range(args.inversion_victims)]
    starts = [torch.zeros(target.num_classes, *dataset.input_shape) for _ in models]
    steps = args.inversion_steps

    def alone(ms: list, xs: list, settings: InversionSettings) -> list:
        return [invert(target, m, x, settings) for m, x in zip(ms, xs)]

    def together(ms: list, xs: list, settings: InversionSettings) -> list:
        return invert_many(target, ms, xs, settings)

    print(f"\nModel inversion of {len(models)} victims' WAFFLe MNIST models, {steps} steps, "
          f"{target.num_classes} classes each; load {load()}")
    out: dict[str, Any] = {"victims": len(models), "steps": steps}
    guesses = {}
    for name, run in (("one at a time", alone), ("batched", together)):
        run(models[:2], starts[:2], InversionSettings(steps=2, patience=steps + 1))
        wall, cpu = time.perf_counter(), time.process_time()
        guesses[name] = run(models, starts, InversionSettings(steps=steps, patience=steps + 1))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out[name] = {"seconds": wall, "cpu_seconds": cpu, "victims_per_second": len(models) / wall}
        print(f"  {name:13s} {wall:7.2f} s wall, {cpu:7.2f} s CPU, {len(models) / wall:6.2f} victims/s, "
              f"{len(models) / cpu:6.2f} victims/CPU-s", flush=True)
    diff = max(float((a.images - b.images).abs().max()) for a, b in zip(*guesses.values()))
    out["speedup"] = out["one at a time"]["seconds"] / out["batched"]["seconds"]
    out["max_abs_image_difference"] = diff
    print(f"  batched / one at a time: {out['speedup']:.2f}x; largest pixel difference {diff:.1e}; "
          f"load {load()}", flush=True)
    results["inversion"] = out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, nargs="*", default=[10, 20, 50],
                   help="clients per round (none: only the whole setting)")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds per measurement")
    p.add_argument("--repeat", type=int, default=1,
                   help="measure each client count this many times, alternating the runners' order, "
                        "and print each runner's median share with its range")
    p.add_argument("--target", type=float, default=0.40, help="share to count the repeats at or above")
    p.add_argument("--runners", nargs="+", default=list(RUNNERS), choices=RUNNERS)
    p.add_argument("--full-rounds", type=int, default=100, help="rounds of the whole setting (0: skip)")
    p.add_argument("--full-executors", nargs="+", default=["batched-vmap", "batched"],
                   choices=["batched-vmap", "batched", "batched-native"])
    p.add_argument("--recipe", choices=list(RECIPES), default="literal",
                   help="waffle-ibp's settings: the paper's literal recipe or the searched personalising one")
    p.add_argument("--inversion-victims", type=int, default=0,
                   help="also time model inversion of this many victims, batched against one at a time")
    p.add_argument("--inversion-steps", type=int, default=300, help="inversion steps per victim")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--data-root", default=os.environ.get("FEDATTACK_DATA"))
    p.add_argument("--json", type=Path, default=None, help="also write all results here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    common = {"threads": args.threads, "device": "cpu", "data_root": args.data_root,
              "hyper": RECIPES[args.recipe]}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores; "
          f"load average {load()}; waffle-ibp recipe {args.recipe} {RECIPES[args.recipe]}")
    results: dict[str, Any] = {"load_start": load(), "threads": torch.get_num_threads(), "recipe": args.recipe,
                               "bmm_gflops": {}, "shares": {}, "rows": [], "full": []}
    per_round(args, common, results)
    if args.full_rounds:
        whole_setting(args, common, results)
    if args.inversion_victims:
        inversion(args, common, results)
    results["load_end"] = load()
    print(f"\nload average at the end: {load()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
