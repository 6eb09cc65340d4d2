"""Exact batch recovery through a dense layer (SPEAR, Dimitrov et al. 2024) against our first-layer
reading (`unmix`), on SPEAR's kind of setting: one gradient step (FedSGD) of a batch of b images
through a ReLU MLP at its initialisation, labels unknown to both (neither reads them).

    FEDATTACK_DATA=../shared/datasets .venv/bin/python benchmarks/lab/inversion_spear.py \\
        --datasets mnist cifar10 --batches 1 5 10 15 20 --victims 5 --table out.md

Per dataset and batch size, `--victims` batches of b random training images (seeded), each one
SGD step of the zoo's `mnist-mlp` shape (pixels-200-10, inputs normalised inside the model) from
its seeded initialisation. Both readings see the first layer's weight and bias update only
(SPEAR also the layer's weights at the step, for its consistency check). Reported per reading:
the share above 20 dB (95% percentile bootstrap over victims), mean PSNR, the seconds per victim.
Not SPEAR's own networks (6-layer ReLU MLPs) nor its GPU: the same algorithm on this project's
MLP shape, on CPU, with `--samples` random subsets at most per victim (and `--programs` linear
programs for `unmix`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from update_inversion_curve import bootstrap, share  # noqa: E402  (a sibling script)


def one_step(data: Any, b: int, seed: int) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor],
                                                 tuple[float, ...], tuple[float, ...]]:
    from fedattack.data.normalization import channel_statistics
    from fedattack.models import build_model
    from fedattack.target import initial_weights

    shape = tuple(data.x_train.shape[1:])
    model = build_model("mnist-mlp", shape, data.num_classes)
    gen = torch.Generator().manual_seed(seed)
    down = initial_weights(model, gen)
    pick = torch.randperm(len(data.x_train), generator=gen)[:b]
    x, y = data.x_train[pick], data.y_train[pick]
    norm = channel_statistics(data.x_train)
    live = {k: v.clone().requires_grad_(True) for k, v in down.items()}
    loss = F.cross_entropy(torch.func.functional_call(model, live, (norm.apply(x),)), y)
    grads = torch.autograd.grad(loss, list(live.values()))
    up = {k: (v - 0.1 * g).detach() for (k, v), g in zip(live.items(), grads)}
    return x, down, up, tuple(norm.mean), tuple(norm.std)


def read_spear(down: dict[str, torch.Tensor], up: dict[str, torch.Tensor], b: int, shape: tuple[int, ...],
               mean: tuple[float, ...], std: tuple[float, ...], samples: int) -> torch.Tensor:
    from fedattack.attacks.data_reconstruction.levels import pixel_normalisation
    from fedattack.attacks.data_reconstruction.spear import disaggregate

    dw = (up["fc1.weight"] - down["fc1.weight"]).double().numpy()
    db = (up["fc1.bias"] - down["fc1.bias"]).double().numpy()
    layer = (down["fc1.weight"].double().numpy(), down["fc1.bias"].double().numpy())
    found = disaggregate(dw, db, b, torch.Generator().manual_seed(0), samples, layer)
    if found.inputs is None:
        return torch.zeros(b, *shape)
    m, s = pixel_normalisation(mean, std, shape)
    return torch.as_tensor(np.clip(found.inputs * s + m, 0, 1), dtype=torch.float32).view(b, *shape)


def read_unmix(down: dict[str, torch.Tensor], up: dict[str, torch.Tensor], b: int, shape: tuple[int, ...],
               mean: tuple[float, ...], std: tuple[float, ...], levels: int, programs: int) -> torch.Tensor:
    from fedattack.attacks.data_reconstruction.unmix import Search, first_layer_update, unmix

    layer = first_layer_update(down, up, shape)
    assert layer is not None
    out = unmix(layer, b, shape, torch.Generator().manual_seed(0), Search(programs=programs, levels=levels),
                (mean, std))
    return out.images if out.images is not None else torch.zeros(b, *shape)


def main() -> None:
    from fedattack.attacks.data_reconstruction.image_metrics import score_images
    from fedattack.attacks.data_reconstruction.levels import pixel_levels
    from fedattack.data import load_dataset

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["mnist", "cifar10"])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 5, 10, 15, 20])
    parser.add_argument("--victims", type=int, default=5)
    parser.add_argument("--samples", type=int, default=2_000_000, help="SPEAR's random subsets per victim, at most")
    parser.add_argument("--readings", nargs="+", default=["spear", "unmix"])
    parser.add_argument("--programs", type=int, default=0,
                        help="unmix's linear programs per victim (0: every lit pixel)")
    parser.add_argument("--table", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        data = load_dataset(name)
        shape = tuple(data.x_train.shape[1:])
        levels = pixel_levels(data.x_test[:64].numpy())
        for b in args.batches:
            for reading in args.readings:
                psnr, seconds = [], []
                for v in range(args.victims):
                    x, down, up, mean, std = one_step(data, b, 1000 * b + v)
                    started = time.perf_counter()
                    images = (read_spear(down, up, b, shape, mean, std, args.samples) if reading == "spear"
                              else read_unmix(down, up, b, shape, mean, std, levels, args.programs))
                    seconds.append(time.perf_counter() - started)
                    psnr.append(score_images(images, x).psnr)
                lo, hi, _ = bootstrap(psnr, share, over="victims")
                pooled = np.concatenate(psnr)
                rows.append({"dataset": name, "batch": b, "reading": reading, "victims": args.victims,
                             "share": share(pooled), "ci": [lo, hi], "psnr_mean": float(pooled.mean()),
                             "seconds": float(np.mean(seconds))})
                r = rows[-1]
                print(f"| {name} | {b} | {reading} | {r['victims']} | {100 * r['share']:.0f}% "
                      f"({100 * lo:.0f}-{100 * hi:.0f}) | {r['psnr_mean']:.1f} | {r['seconds']:.1f} |", flush=True)
    if args.table:
        lines = ["| dataset | batch | reading | victims | recovered > 20 dB (95% CI) | PSNR mean | s / victim |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['dataset']} | {r['batch']} | {r['reading']} | {r['victims']} | {100 * r['share']:.0f}% "
                  f"({100 * r['ci'][0]:.0f}-{100 * r['ci'][1]:.0f}) | {r['psnr_mean']:.1f} | {r['seconds']:.1f} |"
                  for r in rows]
        args.table.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
