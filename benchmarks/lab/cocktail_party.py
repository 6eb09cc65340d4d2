"""The cocktail party attack on a first dense layer's update (docs/privacy.md, "The cocktail party
attack" and "Large clients through wide dense layers"): per victim a disjoint batch of N training
images, a dense layer of U ReLU units on the pixels and a linear layer to the classes at a fresh
seeded initialisation, and the first layer's update: the batch's one aggregated gradient, or
(a cell with a batch size B) minus the weight change of one epoch of plain SGD in minibatches of
B (FedAvg's local run); unmixed by `attacks/data_reconstruction/cocktail.py` (contrast edges, the
attack's default; the prior from 500 test images) and scored as the attack family scores
(one-to-one PSNR matching, `image_metrics.score_images`).

    FEDATTACK_DATA=... python benchmarks/lab/cocktail_party.py --cell cifar10:64:1024:5 ...
    FEDATTACK_DATA=... python benchmarks/lab/cocktail_party.py --plan cifar10:1024:4096:5

writes docs/evidence/privacy/cocktail-party.json (`benchmarks/lab/large_clients.py` writes the
large-client table with the same victims), replacing the cells it remeasures: each cell's
victims, their share above 20 dB, PSNR mean, wall and CPU seconds of the unmixing, the load
average, the process's peak resident memory and whether FastICA converged, with a 95% bootstrap
interval over victims; a cell the attack refuses (`cocktail.unmixable`) is kept with its reason.
The victims are held out: batch k of n images is training images k*n to (k+1)*n - 1, and the
first victim is the first batch past the first HELD_OUT training images, on which the tests and
the choice of the contrast were read. Only the standard library at the top (the evidence check
imports this file to render).
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


ABOUT = "the first dense layer's update (one aggregated gradient, or one epoch of plain SGD at lr 0.1); " \
        "FastICA (edges); 2 shared cores, one BLAS thread"
LR = 0.1  # the FedAvg cells' local learning rate (plain SGD)
HELD_OUT = 128  # training images 0-127: the tests' two batches of 64; the contrast was checked on the first


def first_victim(n: int) -> int:
    """The first batch of n training images wholly past the HELD_OUT images settings were read on."""
    return -(-HELD_OUT // n)


def first_layer_update(dataset: Any, n: int, units: int, k: int, batch: int | None) -> tuple[Any, Any]:
    """Batch k of n images and its first dense layer's update at a fresh seeded initialisation:
    the one aggregated gradient (batch None), or minus the weight change of one epoch of plain
    SGD in minibatches of `batch` (FedAvg's local run; still A X, one row of X per image)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(k)
    x, y = dataset.x_train[k * n:(k + 1) * n], dataset.y_train[k * n:(k + 1) * n]
    flat = x.flatten(1)
    fc1, fc2 = torch.nn.Linear(flat.shape[1], units), torch.nn.Linear(units, dataset.num_classes)
    if batch is None:
        return x, torch.autograd.grad(F.cross_entropy(fc2(fc1(flat).relu()), y), fc1.weight)[0]
    start = fc1.weight.detach().clone()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(k))
    params = [*fc1.parameters(), *fc2.parameters()]
    for i in range(0, n, batch):
        b = order[i:i + batch]
        grads = torch.autograd.grad(F.cross_entropy(fc2(fc1(flat[b]).relu()), y[b]), params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= LR * g
    return x, start - fc1.weight.detach()


def victim(dataset: Any, n: int, units: int, k: int, batch: int | None = None) -> dict[str, Any]:
    """One victim: batch k of n images, its update, the unmixing and its scores (wall and CPU
    seconds of the unmixing, the 1-minute load average when it ended)."""
    import os
    import resource
    import time

    import torch

    from fedattack.attacks.data_reconstruction.cocktail import PixelPrior, separate
    from fedattack.attacks.data_reconstruction.image_metrics import score_images

    x, update = first_layer_update(dataset, n, units, k, batch)
    prior = PixelPrior.of(dataset.x_test[:500].numpy())
    start, cpu = time.perf_counter(), time.process_time()
    found = separate(update.double().numpy(), n, k, prior, tuple(x.shape[1:]))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert found.images is not None, found.note
    scores = score_images(torch.as_tensor(found.images, dtype=torch.float32).view_as(x), x)
    summary = scores.summary()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"victim": k, "share_20db": summary["share_recovered"], "psnr_mean": summary["psnr_mean"],
            "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "load": round(os.getloadavg()[0], 1),
            "peak_mib": round(peak), "iterations": found.iterations, "converged": "not converged" not in found.note}


def parse_cell(cell: str) -> tuple[str, int, int, int, int | None]:
    """dataset:images:units:victims[:batch] (a batch: one epoch of FedAvg in minibatches of it)."""
    parts = cell.split(":")
    if len(parts) not in (4, 5) or not all(p.isdigit() for p in parts[1:]):
        raise SystemExit(f"error: --cell {cell!r} is not dataset:images:units:victims[:batch]")
    return parts[0], int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]) if len(parts) == 5 else None


def measure(cells: list[str], extra: Any = None, done: Any = None, planned: frozenset[str] = frozenset()) \
        -> list[dict[str, Any]]:
    """Each cell's held-out victims (`first_victim` on), or the attack's reason to refuse it; a cell
    of `planned` is only planned (refused, or `not_run`, no victim run); `extra` (dataset, cell,
    victim indices) -> more of the cell (the large-client table's ceiling)."""
    import os

    from fedattack.data import load_dataset

    out: list[dict[str, Any]] = []
    loaded: dict[str, Any] = {}  # each dataset decoded once
    for spec in cells:
        name, n, units, victims, batch = parse_cell(spec)
        if name not in loaded:
            loaded[name] = load_dataset(name, os.environ.get("FEDATTACK_DATA"))
        data = loaded[name]
        ks = list(range(first_victim(n), first_victim(n) + victims))
        cell = measured_cell(data, name, n, units, ks, batch, run=spec not in planned)
        if extra is not None:
            cell.update(extra(data, cell, ks))
        out.append(cell)
        print(json.dumps(out[-1]), flush=True)
        if done is not None:
            done(out)  # each cell saved as it finishes
    return out


def measured_cell(data: Any, name: str, n: int, units: int, ks: list[int], batch: int | None,
                  run: bool = True) -> dict[str, Any]:
    """One cell: its victims' scores and their mean with a 95% bootstrap interval over victims,
    or, where `cocktail.unmixable` refuses the layer, the one-line reason (no victim is run);
    `run` False: the cell is only planned (`not_run`, its victims listed, none run)."""
    import numpy as np

    from fedattack.attacks.data_reconstruction.cocktail import unmixable
    from fedattack.intervals import mean_interval

    cell: dict[str, Any] = {"dataset": name, "images": n, "units": units, "batch": batch,
                            "steps": 1 if batch is None else -(-n // batch)}
    why = unmixable(units, int(data.x_train[0].numel()), n)
    if why or not run:
        return {**cell, **({"refused": why} if why else {"not_run": True}), "victims": [{"victim": k} for k in ks]}
    rows = [victim(data, n, units, k, batch) for k in ks]
    share = mean_interval([r["share_20db"] for r in rows])
    return {**cell, "victims": rows, "share": [share.mean, share.low, share.high],
            "psnr_mean": float(np.mean([r["psnr_mean"] for r in rows]))}


def same_cell(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("dataset", "images", "units", "batch"))


def merged(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evidence's cells with the new ones in place of any they remeasure."""
    kept = [c for c in old if not any(same_cell(c, n) for n in new)]
    return sorted(kept + new, key=lambda c: (c["dataset"], c["images"], c["units"], c.get("batch") or 0))


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def update_of(c: dict[str, Any]) -> str:
    return "one step" if c.get("batch") is None else f"1 epoch, batch {c['batch']} ({c['steps']} steps)"


def share_cells(c: dict[str, Any]) -> list[Any]:
    """The measured columns of one cell; a refused or unrun cell says why in the share's column."""
    v = c["victims"]
    if "refused" in c or "not_run" in c:
        why = f"refused: {c['refused']}" if "refused" in c else f"not run: {c['not_run']}"
        return [len(v), why, *["-"] * (len(MEASURED) - 2)]
    point, low, high = c["share"]
    cpu = [r["cpu_seconds"] for r in v if "cpu_seconds" in r]
    load = [r["load"] for r in v if "load" in r]
    return [len(v), f"{pct(point)} ({pct(low)}-{pct(high)})", ", ".join(f"{100 * r['share_20db']:.0f}" for r in v),
            f"{c['psnr_mean']:.1f}", f"{min(r['seconds'] for r in v):.0f}-{max(r['seconds'] for r in v):.0f}",
            f"{min(cpu):.0f}-{max(cpu):.0f}" if cpu else "-",
            f"{min(load):.1f}-{max(load):.1f}" if load else "-", f"{max(r['peak_mib'] for r in v):,}"]


MEASURED = ["victims", "above 20 dB (95% CI over victims)", "per victim (%)", "PSNR mean", "wall s / victim",
            "CPU s / victim", "load (1 min)", "peak MiB"]


def table(data: dict[str, Any]) -> str:
    """The page's table from the evidence."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import markdown

    rows = [[c["dataset"], f"{c['images']:,}", f"{c['units']:,}", update_of(c), *share_cells(c), PAPER]
            for c in data["rows"]]
    return markdown(["dataset", "images", "units", "update", *MEASURED, "the paper"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], help="dataset:images:units:victims[:batch]")
    parser.add_argument("--plan", action="append", default=[],
                        help="a cell only planned: refused, or not run (its cost scaled from the large-client table)")
    args = parser.parse_args()
    if not args.cell and not args.plan:
        raise SystemExit("error: name a --cell to measure or a --plan")
    sys.path.insert(0, str(ROOT))
    import torch

    from benchmarks.lab.evidence import EVIDENCE, save
    from benchmarks.lab.large_clients import KEY as LARGE
    from benchmarks.lab.large_clients import estimate

    path, large = EVIDENCE / f"{KEY}.json", EVIDENCE / f"{LARGE}.json"
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    measured = json.loads(large.read_text())["rows"] if large.exists() else []
    torch.set_num_threads(1)  # and so FastICA's BLAS (cocktail.separate): the machine is shared
    measure(args.cell + args.plan, planned=frozenset(args.plan),
            extra=lambda _, c, __: {"not_run": estimate(c, measured)} if c.get("not_run") else {},
            done=lambda rows: save(KEY, "benchmarks/lab/cocktail_party.py:table", merged(old, rows), about=ABOUT))


if __name__ == "__main__":
    main()
