"""Reference models per second: the batched executor against one model at a time.

LiRA, RMIA and the shadow-model attack train 16 or more reference models per victim, each a
repeat of the victim's local training. This trains `--references` reference models of a
Fashion-MNIST CNN victim (fmnist-cnn, the victim's recipe: `--samples` records, E epochs,
B=10, lr 0.02, from the same downlink) through `ShadowModels`, exactly as the attacks do, in one
process: with the batched executor (all models in one call: the `conv` kernel, grouped
convolutions), with the batched executor held to its generic `vmap(grad(loss))` step (what
batched CNNs ran before the `conv` kernel; `--no-vmap` skips it), and with the sequential executor
(one model after another); it prints reference models per second and the ratios. An untimed
warm-up of two models runs first for each. `--method fedprox` takes a FedProx victim (mu = 1),
whose proximal pull the grouped step adds (`fedattack/kernels/proximal.py`; FedProx ran the vmap step before).

    flock /work/bench.lock nice -n 5 .venv/bin/python benchmarks/bench_reference_models.py \\
        --data-root /work/shared/datasets --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import time
from unittest import mock

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from fedattack.attacks.membership import shadow
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.membership.shadow import ShadowModels, shadow_splits
from fedattack.attacks.view import Observation
from fedattack.data import load_dataset
from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import build_target
from fedattack.rng import generator
from fedattack.target import Recipe, Target
from fedattack.training import Batch


def setting(args: argparse.Namespace) -> tuple[Target, Observation, Samples]:
    dataset = load_dataset("fmnist", args.data_root)
    spec = FederationSpec(method=args.method, dataset="fmnist", partition="iid", num_clients=100, model="fmnist-cnn",
                          rounds=50, fraction=0.1, recipe=Recipe(epochs=args.epochs, batch_size=10, lr=0.02))
    target = build_target(spec, dataset, 100)
    server = target.init_server(generator(0, "bench-init"))
    start = Observation(round=0, down=target.broadcast(server, 0, 0))
    return target, start, Samples(dataset.x_test[:4000], dataset.y_test[:4000])


def sample_flops(target: Target, start: Observation, aux: Samples) -> float:
    """Floating-point operations of one training sample's forward and backward (torch's counter),
    so the report can say how close each path runs to what the arithmetic alone costs."""
    assert start.down is not None
    params = {k: start.down[k].clone().requires_grad_(True) for k in target.param_names}
    batch = Batch(aux.x[:10], aux.y[:10], torch.full((10,), 0.1))
    with FlopCounterMode(display=False) as counter:
        loss = Target.local_loss(target, params, {}, batch, {}, torch.tensor(0))  # without a pull
        torch.autograd.grad(loss, list(params.values()))
    return counter.get_total_flops() / 10


def timed(target: Target, start: Observation, aux: Samples, path: str, count: int,
          samples: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to train `count` reference models."""
    if path == "vmap":  # ShadowModels builds its executor by name: hand it the vmap-only one
        with mock.patch.object(shadow, "make_executor", lambda name, device="cpu": BatchedExecutor(fast=False)):
            return timed(target, start, aux, "batched", count, samples)
    counts = [samples // 10] * 10  # the victim's size, an even class mix
    datas = shadow_splits(aux, counts, count, 0.5, seed=1)
    trainer = ShadowModels(target, path, seed=1, victim=0)
    trainer.train(start, datas[:2], solo_deployed=False)  # warm-up, untimed
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.train(start, datas, solo_deployed=False)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("FEDATTACK_DATA"))
    parser.add_argument("--method", default="fedavg", choices=["fedavg", "fedprox"])
    parser.add_argument("--references", type=int, default=16)
    parser.add_argument("--samples", type=int, default=480)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-vmap", action="store_true", help="Skip the batched executor's vmap step.")
    parser.add_argument("--json", default=None, help="Also write the figures to this file.")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target, start, aux = setting(args)
    load_before = os.getloadavg()
    paths = ["batched", "sequential"] if args.no_vmap else ["batched", "vmap", "sequential"]
    runs = {p: timed(target, start, aux, p, args.references, args.samples) for p in paths}
    seconds, cpu = {k: v[0] for k, v in runs.items()}, {k: v[1] for k, v in runs.items()}
    work = sample_flops(target, start, aux) * args.samples * args.epochs * args.references
    out = {"method": args.method, "references": args.references, "samples": args.samples, "epochs": args.epochs,
           "threads": args.threads,
           "seconds": {k: round(v, 2) for k, v in seconds.items()},
           "cpu_seconds": {k: round(v, 2) for k, v in cpu.items()},
           "models_per_second": {k: round(args.references / v, 3) for k, v in seconds.items()},
           "models_per_cpu_second": {k: round(args.references / v, 3) for k, v in cpu.items()},
           "speedup": round(seconds["sequential"] / seconds["batched"], 2),
           "speedup_cpu": round(cpu["sequential"] / cpu["batched"], 2),
           "speedup_over_vmap": round(seconds["vmap"] / seconds["batched"], 2) if "vmap" in seconds else None,
           "gflop_per_second": {k: round(work / v / 1e9, 1) for k, v in seconds.items()},
           "load_average_before": [round(x, 2) for x in load_before],
           "load_average_after": [round(x, 2) for x in os.getloadavg()], "torch": torch.__version__}
    print(json.dumps(out))
    print(f"{args.references} reference models ({args.method}, fmnist-cnn, {args.samples} samples, "
          f"E={args.epochs}, B=10), "
          f"{args.threads} threads: batched {seconds['batched']:.1f} s ({out['models_per_second']['batched']} "
          f"models/s), one at a time {seconds['sequential']:.1f} s ({out['models_per_second']['sequential']} "
          f"models/s), {out['speedup']}x (CPU seconds {cpu['batched']:.1f} against {cpu['sequential']:.1f}, "
          f"{out['speedup_cpu']}x); load {np.round(load_before, 1).tolist()}")
    print("arithmetic: " + ", ".join(f"{k} {v} GFLOP/s" for k, v in out["gflop_per_second"].items())
          + f" ({work / 1e9:.0f} GFLOP of forward and backward in all)")
    if "vmap" in seconds:
        print(f"batched with the vmap step (before the grouped-convolution step): {seconds['vmap']:.1f} s "
              f"({out['models_per_second']['vmap']} models/s); the grouped step is {out['speedup_over_vmap']}x it")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
