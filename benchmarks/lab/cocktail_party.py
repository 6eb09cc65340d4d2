"""The cocktail party attack on one-step aggregated gradients (docs/privacy.md, "The cocktail party
attack"): per victim a disjoint batch of N training images, a dense layer of U ReLU units on the
pixels and a linear layer to the classes at a fresh seeded initialisation, the batch's one
aggregated gradient of the first layer, unmixed by `attacks/data_reconstruction/cocktail.py`
(contrast edges, the attack's default; the prior from 500 test images) and scored as the attack
family scores (one-to-one PSNR matching, `image_metrics.score_images`).

    FEDATTACK_DATA=... python benchmarks/lab/cocktail_party.py --cell cifar10:64:1024:5 ...

writes docs/evidence/privacy/cocktail-party.json (each cell's victims, their share above 20 dB,
PSNR mean, seconds and the process's peak resident memory, with a 95% bootstrap interval over
victims); `table` renders it. Only the standard library at the top (the evidence check imports
this file to render).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KEY = "privacy/cocktail-party"
PAPER = "recovers batches up to 1,024 (its abstract; it scores by LPIPS, not PSNR)"


def victim(dataset: Any, n: int, units: int, k: int) -> dict[str, Any]:
    """One victim: batch k of n images, its gradient, the unmixing and its scores."""
    import resource
    import time

    import torch
    import torch.nn.functional as F

    from fedattack.attacks.data_reconstruction.cocktail import PixelPrior, separate
    from fedattack.attacks.data_reconstruction.image_metrics import score_images

    torch.manual_seed(k)
    x, y = dataset.x_train[k * n:(k + 1) * n], dataset.y_train[k * n:(k + 1) * n]
    flat = x.flatten(1)
    fc1, fc2 = torch.nn.Linear(flat.shape[1], units), torch.nn.Linear(units, dataset.num_classes)
    grad = torch.autograd.grad(F.cross_entropy(fc2(fc1(flat).relu()), y), fc1.weight)[0]
    prior = PixelPrior.of(dataset.x_test[:500].numpy())
    start = time.perf_counter()
    found = separate(grad.double().numpy(), n, k, prior, tuple(x.shape[1:]))
    seconds = time.perf_counter() - start
    assert found.images is not None, found.note
    scores = score_images(torch.as_tensor(found.images, dtype=torch.float32).view_as(x), x)
    summary = scores.summary()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"victim": k, "share_20db": summary["share_recovered"], "psnr_mean": summary["psnr_mean"],
            "seconds": round(seconds, 1), "peak_mib": round(peak), "iterations": found.iterations}


def measure(cells: list[str], done: Any = None) -> list[dict[str, Any]]:
    import os

    import numpy as np

    from fedattack.data import load_dataset
    from fedattack.intervals import mean_interval

    out = []
    for cell in cells:
        name, n, units, victims = cell.split(":")
        data = load_dataset(name, os.environ.get("FEDATTACK_DATA"))
        rows = [victim(data, int(n), int(units), k) for k in range(int(victims))]
        share = mean_interval([r["share_20db"] for r in rows])
        out.append({"dataset": name, "images": int(n), "units": int(units), "victims": rows,
                    "share": [share.mean, share.low, share.high],
                    "psnr_mean": float(np.mean([r["psnr_mean"] for r in rows]))})
        print(json.dumps(out[-1]), flush=True)
        if done is not None:
            done(out)  # each cell saved as it finishes
    return out


def table(data: dict[str, Any]) -> str:
    """The page's table from the evidence."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import markdown

    def pct(v: float) -> str:
        return f"{100 * v:.1f}%"

    rows = []
    for c in data["rows"]:
        v = c["victims"]
        point, low, high = c["share"]
        rows.append([c["dataset"], f"{c['images']:,}", f"{c['units']:,}", len(v),
                     f"{pct(point)} ({pct(low)}-{pct(high)})", ", ".join(f"{100 * r['share_20db']:.0f}" for r in v),
                     f"{c['psnr_mean']:.1f}", f"{min(r['seconds'] for r in v):.0f}-{max(r['seconds'] for r in v):.0f}",
                     f"{max(r['peak_mib'] for r in v):,}", PAPER])
    return markdown(["dataset", "images", "units", "victims", "above 20 dB (95% CI over victims)", "per victim (%)",
                     "PSNR mean", "s / victim", "peak MiB", "the paper"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", required=True, help="dataset:images:units:victims")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from benchmarks.lab.evidence import save

    torch.set_num_threads(1)  # and so FastICA's BLAS (cocktail.separate): the machine is shared
    measure(args.cell, lambda rows: save(KEY, "benchmarks/lab/cocktail_party.py:table", rows,
                                         about="one-step aggregated gradients through a dense ReLU layer; "
                                               "FastICA (edges); 2 shared cores, one BLAS thread"))


if __name__ == "__main__":
    main()
