"""Seconds and peak memory per victim of update inversion in each setting docs/privacy.md reports
(#33 item 4, #36), one victim a setting, each in a fresh process (its own peak).

    FEDATTACK_DATA=../shared/datasets flock -x /work/locks/quiet.lock \\
        .venv/bin/python benchmarks/bench_inversion.py --threads 2 [--settings KEY ...] [--json out.json]

A setting is one FedAvg client's local run from the model's seeded initialisation on N training
images (the dataset's first N after a seeded shuffle), attacked as an eavesdropper with labels
unknown, with the attack settings the docs use. Printed per setting: the attack's wall seconds
(`Attack.run`: label counting and inversion; the client's run and the scoring excluded), the
process's peak resident memory and what it was before the attack (the dataset and the model),
and the share above 20 dB and mean PSNR of that one victim (a sanity check, not a result: the
results are over held-out victims in docs/privacy.md). `uptime`'s load is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch


@dataclass(frozen=True)
class Setting:
    key: str
    label: str
    dataset: str
    model: str
    images: int
    epochs: int
    batch_size: int
    lr: float
    attack: dict[str, Any] = field(default_factory=dict)


FIRST = {"start": "first-layer", "labels": "recovered"}
SETTINGS = (
    Setting("dimitrov-mnist", "Dimitrov et al.'s CNN, MNIST, 50 images, 10 epochs of 10 batches of 5, lr 0.004",
            "mnist", "dimitrov-cnn", 50, 10, 5, 0.004, FIRST),
    Setting("dimitrov-fmnist", "the same on Fashion-MNIST", "fmnist", "dimitrov-cnn", 50, 10, 5, 0.004, FIRST),
    Setting("breaching-cifar", "breaching's FedAvg case on the seeds' CIFAR CNN: 4 images, 4 steps of 2, lr 0.001",
            "cifar10", "cifar-cnn", 4, 2, 2, 0.001, {"start": "random", "labels": "recovered", "iterations": 2000,
                                                       "step_size": 0.1, "tv": 1e-3}),
    Setting("fmnist-cnn-1x1", "seeds' Fashion-MNIST CNN, 1 step of 1 image", "fmnist", "fmnist-cnn", 1, 1, 1, 0.02,
            FIRST),
    Setting("fmnist-cnn-5e50b5", "seeds' Fashion-MNIST CNN, 5 epochs of 50, B = 5 (optimiser, 100 iterations)",
            "fmnist", "fmnist-cnn", 50, 5, 5, 0.02, {**FIRST, "iterations": 100}),
    Setting("cifar-cnn-5e50b5", "seeds' CIFAR-10 CNN, 5 epochs of 50, B = 5", "cifar10", "cifar-cnn", 50, 5, 5,
            0.02, FIRST),
    Setting("mnist-mlp-rounds", "MNIST MLP, 50 images, first-layer reading (one round)", "mnist", "mnist-mlp",
            50, 5, 10, 0.04, FIRST),
)


def client_run(setting: Setting, seed: int) -> tuple[Any, dict[str, torch.Tensor], dict[str, torch.Tensor], Any]:
    from fedattack.attacks.data import Samples
    from fedattack.attacks.update_inversion.local_run import LocalRecipe, simulate_local_run
    from fedattack.data import load_dataset
    from fedattack.data.normalization import channel_statistics
    from fedattack.registry import TARGETS
    from fedattack.target import Recipe, TargetContext, initial_weights

    data = load_dataset(setting.dataset)
    recipe = Recipe(epochs=setting.epochs, batch_size=setting.batch_size, lr=setting.lr)
    ctx = TargetContext(model=setting.model, input_shape=tuple(data.x_train.shape[1:]), num_classes=data.num_classes,
                        recipe=recipe, normalization=channel_statistics(data.x_train))
    target = TARGETS.get("fedavg")(TARGETS.get("fedavg").make_hyper({}), ctx)
    gen = torch.Generator().manual_seed(seed)
    down = initial_weights(target.model, gen)
    pick = torch.randperm(len(data.x_train), generator=gen)[:setting.images]
    victim = Samples(data.x_train[pick], data.y_train[pick])
    orders = [torch.randperm(setting.images, generator=gen) for _ in range(setting.epochs)]
    copies = torch.stack([victim.x[o] for o in orders])
    labels = torch.stack([victim.y[o] for o in orders])
    after = simulate_local_run(target.forward, down, copies, labels, LocalRecipe(setting.epochs, setting.batch_size,
                                                                                 setting.lr))
    aux = Samples(data.x_test[:64], torch.full((64,), -1, dtype=torch.long))
    return target, down, {k: v.detach() for k, v in after.items()}, (victim, aux)


def measure(setting: Setting, seed: int, threads: int) -> dict[str, Any]:
    """One setting in this process: the attack's seconds and the process's peak memory."""
    from fedattack.attacks.base import Adversary
    from fedattack.attacks.reconstruction.base import RECONSTRUCTIONS, Reconstructed, Reconstructor
    from fedattack.attacks.update_inversion.image_metrics import score_images
    from fedattack.attacks.view import Knowledge, Observation, View
    from fedattack.registry import ATTACKS

    torch.set_num_threads(threads)
    target, down, up, (victim, aux) = client_run(setting, seed)
    knowledge = Knowledge(aux=aux, queries=aux, victim_size=setting.images, victim_class_counts=[], labels_known=False)
    view = View("eavesdropper", 0, target, (), SimpleNamespace(index=[], load=lambda **_: []))
    adv = Adversary(view, knowledge, Observation(1, down, up), Reconstructed("decoded", dict(up)),
                    Reconstructor(RECONSTRUCTIONS.get("decoded")(), target, knowledge, 0, 0))
    attack = ATTACKS.get("update-inversion").from_options(dict(setting.attack))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.perf_counter()
    guesses = attack.run(adv, torch.Generator().manual_seed(seed))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    scores = score_images(guesses.images, victim.x)
    return {"setting": setting.key, "label": setting.label, "seconds": round(seconds, 1), "peak_bytes": peak,
            "before_bytes": before, "share_recovered": scores.share_recovered,
            "psnr_mean": round(float(scores.psnr.mean()), 1), "threads": threads, "load": os.getloadavg()[0],
            "how": guesses.info.get("inverted_by", "")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="*", default=[s.key for s in SETTINGS],
                        help=f"keys: {', '.join(s.key for s in SETTINGS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one setting, JSON out
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    chosen = {s.key: s for s in SETTINGS}
    if args.one:
        print(json.dumps(measure(chosen[args.one], args.seed, args.threads)))
        return
    rows = []
    print(f"{args.threads} threads, seed {args.seed}, load {os.getloadavg()[0]:.1f}", flush=True)
    for key in args.settings:
        out = subprocess.run([sys.executable, __file__, "--one", key, "--threads", str(args.threads),
                              "--seed", str(args.seed)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{key:>18}  {row['seconds']:8.1f} s/victim  peak {row['peak_bytes'] / 2**30:5.2f} GiB "
              f"(before the attack {row['before_bytes'] / 2**30:4.2f})  "
              f"recovered {100 * row['share_recovered']:3.0f}%  "
              f"PSNR {row['psnr_mean']:5.1f} dB  load {row['load']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
