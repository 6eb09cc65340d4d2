"""Issue #48's large-client table (docs/privacy.md, "Large clients through wide dense layers"):
clients of 256, 1,000 and 2,400 images, their first dense layer's update (one aggregated gradient,
or one epoch of FedAvg in batches of 32) through 1,024, 2,048 and 4,096 ReLU units, read by
`cocktail-party` exactly as `benchmarks/lab/cocktail_party.py` reads it (the same held-out
victims, update and scoring), beside the ceiling of any per-pixel program on the same images.

    FEDATTACK_DATA=... python benchmarks/lab/large_clients.py run --grid mnist --victims 5
    FEDATTACK_DATA=... python benchmarks/lab/large_clients.py run --grid cifar10 --only 256:4096
    FEDATTACK_DATA=... python benchmarks/lab/large_clients.py run --grid cifar10 --no-run  # the rest: plans

Every cell of a grid is written: measured; refused by the attack (`cocktail.unmixable`, in one
line, no victim run); or, outside `--only` (all of them with `--no-run`), planned: not run, with
its CPU a victim scaled from a measured 256-image cell (`estimate`), and never in place of a cell
measured before. The ceiling is the share of each victim's images that are extreme rays of the
non-negative part of their span (`extreme_rays` of `benchmarks/lab/inversion_rounds_curve.py`):
every per-pixel program returns such a ray, so no program reads more. It is a property of the
images wherever the layer holds their span, so the same for every such width; where the layer
has fewer units than the client has images the update's rank is at most its units and no image
lies in its row space but by accident, so the ceiling is 0 there, by rank. Writes
docs/evidence/privacy/large-clients.json, cell by cell as each finishes; `table` renders it.
Only the standard library at the top (the evidence check imports this file to render).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KEY = "privacy/large-clients"
IMAGES = (256, 1000, 2400)
UNITS = (1024, 2048, 4096)
BATCHES: tuple[int | None, ...] = (None, 32)  # one aggregated gradient; one epoch of FedAvg in batches of 32


def grid(dataset: str, victims: int, only: list[str]) -> tuple[list[str], list[str]]:
    """The grid's cells as `cocktail_party` cells, cheapest first (fewest images, narrowest layer):
    those to run (all, or the images:units of `only`) and the rest, only planned."""
    keep = {tuple(int(v) for v in o.split(":")) for o in only}
    cells = [(f"{dataset}:{n}:{u}:{victims}" + ("" if b is None else f":{b}"), not keep or (n, u) in keep)
             for n in IMAGES for u in UNITS for b in BATCHES]
    if keep and not any(run for _, run in cells):
        raise SystemExit(f"error: --only {only} names no cell of the grid ({IMAGES} images x {UNITS} units)")
    return [c for c, run in cells if run], [c for c, run in cells if not run]


def estimate(cell: dict[str, Any], measured: list[dict[str, Any]]) -> str:
    """Why an applicable cell was not run: its CPU a victim scaled from the narrowest measured
    256-image cell of the same dataset and update at least as wide (FastICA's iterations grow as
    the images squared; its whitening with the width, so a wider reference overstates)."""
    ref = sorted((c for c in measured if "share" in c and c["images"] == 256 and c["units"] >= cell["units"]
                  and c["dataset"] == cell["dataset"] and c.get("batch") == cell.get("batch")),
                 key=lambda c: c["units"])
    if not ref:
        return "beyond this session's CPU (no measured 256-image cell to scale from)"
    cpu = sum(r["cpu_seconds"] for r in ref[0]["victims"]) / len(ref[0]["victims"])
    minutes = cpu * (cell["images"] / 256) ** 2 / 60
    return f"~{minutes:,.0f} CPU-min a victim (the 256-image {ref[0]['units']:,}-unit cell's CPU x (n/256)^2)"


def ceiling(data: Any, cell: dict[str, Any], ks: list[int], cache: dict[tuple[int, int], float]) -> dict[str, Any]:
    """The cell's per-pixel ceiling: each victim's extreme-ray share (computed once per victim's
    images), their mean and 95% bootstrap interval over victims; 0 by rank where the layer is
    narrower than the client."""
    from threadpoolctl import threadpool_limits

    from benchmarks.lab.inversion_rounds_curve import extreme_rays
    from fedattack.intervals import mean_interval

    n, units = cell["images"], cell["units"]
    if units < n:
        return {"ceiling_by_rank": True}
    for k in ks:
        if (n, k) not in cache:
            # one BLAS thread: NumPy's default of one per core, on 2 cores shared by ten jobs, spun for
            # minutes on the 256 small SVDs a victim (5 victims of 256 images: over 5 CPU-minutes, not done)
            with threadpool_limits(1):
                cache[n, k] = extreme_rays(data.x_train[k * n:(k + 1) * n].flatten(1).double().numpy())
    found = mean_interval([cache[n, k] for k in ks])
    return {"extreme_rays": [found.mean, found.low, found.high], "extreme_rays_per_victim": [cache[n, k] for k in ks]}


def table(data: dict[str, Any]) -> str:
    """The page's table: images x width x one step / one epoch, the ceiling beside each cell."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.cocktail_party import MEASURED, pct, share_cells, update_of
    from benchmarks.lab.evidence import markdown

    def limit(c: dict[str, Any]) -> str:
        if c.get("ceiling_by_rank"):
            return f"0 (rank at most {c['units']:,}, fewer than the images)"
        point, low, high = c["extreme_rays"]
        return f"{pct(point)} ({pct(low)}-{pct(high)})"

    rows = [[c["dataset"], f"{c['images']:,}", f"{c['units']:,}", update_of(c), *share_cells(c), limit(c)]
            for c in data["rows"]]
    return markdown(["dataset", "images", "units", "update", *MEASURED, "extreme rays (per-pixel ceiling)"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("run", help="measure a grid's cells (each saved as it finishes)")
    cmd.add_argument("--grid", required=True, choices=["mnist", "cifar10"], help="the dataset of the grid")
    cmd.add_argument("--victims", type=int, default=5, help="held-out victims a cell")
    cmd.add_argument("--only", action="append", default=[], help="images:units, the cells of this run")
    cmd.add_argument("--no-run", action="store_true", help="run no victim: write the grid's unmeasured cells' plans")
    args = parser.parse_args()
    if args.victims < 1:
        raise SystemExit(f"error: --victims {args.victims}: at least one")
    sys.path.insert(0, str(ROOT))
    import torch

    from benchmarks.lab.cocktail_party import measure, merged, same_cell
    from benchmarks.lab.evidence import EVIDENCE, save

    path = EVIDENCE / f"{KEY}.json"
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    torch.set_num_threads(1)  # and so FastICA's BLAS (cocktail.separate): the machine is shared
    cache: dict[tuple[int, int], float] = {}
    run, rest = grid(args.grid, args.victims, args.only)
    run, rest = ([], run + rest) if args.no_run else (run, rest)
    kept = [c for c in old if "share" in c]  # a cell measured before is not replaced by a plan
    planned = [c for c in rest if not any(same_cell(k, spec_cell(c)) for k in kept)]
    new: list[dict[str, Any]] = []

    def more(data: Any, cell: dict[str, Any], ks: list[int]) -> dict[str, Any]:
        found = ceiling(data, cell, ks, cache)
        return {**found, "not_run": estimate(cell, kept + new)} if cell.get("not_run") else found

    def saved(rows: list[dict[str, Any]]) -> None:
        new[:] = rows
        save(KEY, "benchmarks/lab/large_clients.py:table", merged(old, rows),
             about="the cells of benchmarks/lab/cocktail_party.py beside the per-pixel ceiling (extreme rays of "
                   "the images' span); 2 shared cores")

    measure(run + planned, extra=more, done=saved, planned=frozenset(planned))


def spec_cell(spec: str) -> dict[str, Any]:
    from benchmarks.lab.cocktail_party import parse_cell

    name, n, units, _, batch = parse_cell(spec)
    return {"dataset": name, "images": n, "units": units, "batch": batch}


if __name__ == "__main__":
    main()
