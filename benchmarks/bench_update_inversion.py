"""Seconds per victim of the update-inversion attacks at the issue's local workloads (#15).

    nice -n 5 .venv/bin/python benchmarks/bench_update_inversion.py --threads 2
    FEDATTACK_DATA=/work/shared/datasets .venv/bin/python benchmarks/bench_update_inversion.py \\
        --dataset mnist --model mnist-mlp --lr 0.04 --attacks update-inversion \\
        --work 1x1 1x10 1e50b5 5e50b5 --set start=first-layer --threads 2

Each workload is one FedAvg client's local run from the model's seeded initialisation, on the
first N training images: 1 step of 1 image, 1 step of 10, 1 epoch of 50 in batches of 5, 5
epochs of 50 (`--work` picks some by key). The attack sees what an eavesdropper sees (downlink,
uplink, the recipe and the sample count; labels unknown, so they are counted from the update)
and runs its whole `run` (label recovery and inversion) with the given iterations; the time is
wall clock for that call on `--threads` threads. PSNR and the share above 20 dB are printed
beside it as a sanity check, not as the issue's measured curve (that needs longer runs).

On a machine whose cores are busy with other work, 2 threads can be ten times slower than one
(measured here at load 6 on 2 cores: 1 step of 10 images, 28 s on 2 threads against 2.4 s on
one): compare `--threads 1` before reading a 2-thread figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from fedattack.attacks.base import Adversary
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS, Reconstructed, Reconstructor
from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.local_run import LocalRecipe, simulate_local_run
from fedattack.attacks.view import Knowledge, Observation, View, Wire
from fedattack.data import load_dataset
from fedattack.registry import ATTACKS, TARGETS
from fedattack.target import Recipe, State, Target, TargetContext, initial_weights


@dataclass(frozen=True)
class Work:
    key: str
    label: str
    images: int
    epochs: int
    batch_size: int


WORKLOADS = (Work("1x1", "1 step of 1 image", 1, 1, 1),
             Work("1x10", "1 step of 10 images", 10, 1, 10),
             Work("1e50b5", "1 epoch of 50 images, batches of 5", 50, 1, 5),
             Work("5e50b5", "5 epochs of 50 images, batches of 5", 50, 5, 5),
             Work("5e480b10", "5 epochs of 480 images, batches of 10 (WAFFLe's)", 480, 5, 10))


def client_uplink(target: Target, down: State, victim: Samples, lr: float, work: Work) -> State:
    """The client's weights after its run (batches in the stored order, as the attack's simulation)."""
    copies = victim.x.expand(work.epochs, *victim.x.shape)
    after = simulate_local_run(target.forward, down, copies, victim.y, LocalRecipe(work.epochs, work.batch_size, lr))
    return {k: v.detach() for k, v in after.items()}


def eavesdropper(target: Target, down: State, up: State, n: int, aux: Samples) -> Adversary:
    """What an eavesdropper on one round of the victim's channel holds, labels unknown."""
    unlabelled = Samples(aux.x, torch.full_like(aux.y, -1))
    knowledge = Knowledge(aux=unlabelled, queries=unlabelled, victim_size=n, victim_class_counts=[],
                          labels_known=False)
    view = View("eavesdropper", 0, target, Wire(SimpleNamespace(index=[], load=lambda **_: []), ()))
    strategy = RECONSTRUCTIONS.get("decoded")()
    return Adversary(view, knowledge, Observation(1, down, up), Reconstructed("decoded", dict(up)),
                     Reconstructor(strategy, target, knowledge, 0, 0))


def measure(attack_name: str, work: Work, args: argparse.Namespace, data: Any) -> dict[str, Any]:
    recipe = Recipe(epochs=work.epochs, batch_size=work.batch_size, lr=args.lr)
    ctx = TargetContext(model=args.model, input_shape=tuple(data.x_train.shape[1:]), num_classes=data.num_classes,
                        recipe=recipe)
    target = TARGETS.get("fedavg")(TARGETS.get("fedavg").make_hyper({}), ctx)
    down = initial_weights(target.model, torch.Generator().manual_seed(args.seed))
    victim = Samples(data.x_train[:work.images], data.y_train[:work.images])
    up = client_uplink(target, down, victim, args.lr, work)
    adv = eavesdropper(target, down, up, work.images, Samples(data.x_test[:64], data.y_test[:64]))
    options: dict[str, Any] = {"iterations": args.iterations, "labels": "recovered"}
    options.update(dict(kv.split("=", 1) for kv in args.set))
    attack = ATTACKS.get(attack_name).from_options(options)
    started = time.perf_counter()
    guesses = attack.run(adv, torch.Generator().manual_seed(args.seed))
    seconds = time.perf_counter() - started
    scores = score_images(guesses.images, victim.x)
    return {"attack": attack_name, "work": work.label, "seconds": round(seconds, 2), "settings": args.set,
            "inverted_by": guesses.info.get("inverted_by", ""),
            "psnr_mean": round(float(scores.psnr.mean()), 1), "share_recovered": scores.share_recovered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="digits-mlp")
    parser.add_argument("--work", nargs="*", default=[w.key for w in WORKLOADS],
                        help=f"workload keys: {', '.join(w.key for w in WORKLOADS)}")
    parser.add_argument("--attacks", nargs="*", default=["gradient-inversion", "update-inversion"])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.1, help="the client's SGD rate")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], help="attack settings, e.g. start=first-layer")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset(args.dataset)
    rows = []
    print(f"{args.dataset} {args.model}, {args.iterations} iterations, {args.threads} threads, "
          f"settings {args.set}, load {os.getloadavg()[0]:.1f}")
    for work in (w for w in WORKLOADS if w.key in args.work):
        for name in args.attacks:
            row = measure(name, work, args, data)
            rows.append(row)
            print(f"{name:>20}  {work.label:<38} {row['seconds']:8.2f} s/victim   "
                  f"PSNR {row['psnr_mean']:5.1f} dB   recovered {100 * row['share_recovered']:5.1f}%   "
                  f"({row['inverted_by']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
