"""The large-client table's machinery (benchmarks/lab/large_clients.py, cocktail_party.py): its
victims are held out from the images the settings were read on, a cell the attack refuses runs
no victim and says why, the ceiling is 0 by rank where the layer is narrower than the client,
and the extreme-ray ceiling counts what it should on images whose answer is known."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmarks.lab import cocktail_party as cp
from benchmarks.lab import large_clients as lc
from benchmarks.lab.inversion_rounds_curve import extreme_rays


@pytest.mark.parametrize("n", [64, 100, 128, 256, 1000, 1024, 2400])
def test_the_first_victim_is_the_first_batch_past_the_held_out_images(n: int) -> None:
    k = cp.first_victim(n)
    assert k * n >= cp.HELD_OUT > (k - 1) * n


def test_a_refused_cell_runs_no_victim_and_its_row_says_why() -> None:
    data = SimpleNamespace(x_train=torch.zeros(3, 1, 28, 28))  # no test images: a victim run would fail
    cell = cp.measured_cell(data, "mnist", 1000, 4096, [1, 2, 3, 4, 5], 32)
    assert "784 pixels" in cell["refused"] and "share" not in cell and len(cell["victims"]) == 5
    narrow = cp.measured_cell(data, "mnist", 2400, 1024, [1], None)
    assert "more than the first layer's 1,024 units" in narrow["refused"]
    assert lc.ceiling(data, narrow, [1], {}) == {"ceiling_by_rank": True}
    page = lc.table({"rows": [{**cell, "extreme_rays": [0.0, 0.0, 0.0]}, {**narrow, "ceiling_by_rank": True}]})
    assert "refused: 1,000 images of 784 pixels" in page and "0 (rank at most 1,024" in page
    assert "1 epoch, batch 32 (32 steps)" in page


def test_the_grid_is_every_size_width_and_update_and_only_narrows_what_runs() -> None:
    run, rest = lc.grid("mnist", 5, [])
    assert len(run) == 18 and not rest and run[0] == "mnist:256:1024:5" and run[1] == "mnist:256:1024:5:32"
    run, rest = lc.grid("cifar10", 3, ["256:4096"])
    assert run == ["cifar10:256:4096:3", "cifar10:256:4096:3:32"] and len(rest) == 16
    with pytest.raises(SystemExit, match="names no cell"):
        lc.grid("mnist", 5, ["300:4096"])


def test_a_cell_not_run_runs_no_victim_and_says_what_it_would_cost() -> None:
    data = SimpleNamespace(x_train=torch.zeros(3, 3, 32, 32))
    cell = cp.measured_cell(data, "cifar10", 1000, 4096, [1, 2], None, run=False)
    assert cell["not_run"] is True and "share" not in cell and "refused" not in cell
    measured = {"dataset": "cifar10", "images": 256, "units": 4096, "batch": None, "share": [0.0, 0.0, 0.0],
                "victims": [{"cpu_seconds": 60.0}, {"cpu_seconds": 120.0}]}
    assert lc.estimate(cell, [measured]).startswith("~23 CPU-min a victim")  # 90 s x (1000/256)^2
    assert "4,096-unit cell" in lc.estimate({**cell, "units": 2048}, [measured])  # a wider cell bounds it
    assert "no measured 256-image cell" in lc.estimate({**cell, "batch": 32}, [measured])
    page = lc.table({"rows": [{**cell, "not_run": lc.estimate(cell, [measured]), "extreme_rays": [0.0, 0.0, 0.0]}]})
    assert "not run: ~23 CPU-min a victim" in page


def test_extreme_rays_counts_the_sparse_images_and_not_the_dense_one() -> None:
    """Five images on disjoint pixels are each the only non-negative direction of the span that
    vanishes where they do; an image lit everywhere is not (its zeros pin nothing)."""
    rng = np.random.default_rng(0)
    x = np.zeros((6, 40))
    for i in range(5):
        x[i, 6 * i:6 * i + 6] = rng.uniform(0.2, 1.0, 6)
    x[5] = rng.uniform(0.2, 1.0, 40)
    assert extreme_rays(x) == pytest.approx(5 / 6)
    assert extreme_rays(x[:5]) == 1.0
