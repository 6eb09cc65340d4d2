"""The held-out WAFFLE table's arithmetic (benchmarks/lab/waffle_heldout.py): its t quantiles, its
interval, and that seeds not run are named, not dropped."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from benchmarks.lab import waffle_heldout as wh


def test_the_t_quantiles_are_students() -> None:
    for df, q in enumerate(wh.T975, start=1):
        assert q == pytest.approx(float(stats.t.ppf(0.975, df)), abs=1e-4)


def test_the_interval_is_the_t_interval_clipped_to_a_percentage() -> None:
    values = [90.0, 94.0, 98.0]
    mean, low, high = wh.t_interval(values)  # type: ignore[misc]
    half = float(stats.t.ppf(0.975, 2)) * statistics.stdev(values) / math.sqrt(3)
    assert (mean, low) == (pytest.approx(94.0), pytest.approx(94.0 - half, abs=1e-3))
    assert high == 100.0 and 94.0 + half > 100.0
    assert wh.t_interval([97.0]) is None


def _row(reading: str, seed: int, best: float, last: float) -> dict[str, object]:
    return {"distribution": "B", "reading": reading, "seed": seed, "best": best, "best_round": 90,
            "round100": last, "diverged": last < 50, "seconds": 1, "cell": "c"}


def test_the_table_names_the_seeds_not_run_and_gives_no_interval_for_one() -> None:
    data = {"cells": [{"distribution": "B", "reading": "stabilised", "seeds": [2, 3, 4]},
                      {"distribution": "B", "reading": "literal", "seeds": [2, 3, 4]}],
            "rows": [_row("stabilised", 3, 97.0, 96.0), _row("stabilised", 2, 95.0, 95.0),
                     _row("literal", 2, 92.0, 22.5)]}
    lines = wh.table(data).splitlines()
    assert "2 of 3" in lines[2] and "s2: 95.0 (90) / 95.0; s3: 97.0 (90) / 96.0; s4: not run" in lines[2]
    assert "96.0 [" in lines[2]  # the mean of 95 and 97, with an interval
    assert "1 of 3" in lines[3] and "22.5 NaN" in lines[3] and "(n = 1, no interval)" in lines[3]


def test_a_cell_of_neither_reading_is_refused() -> None:
    with pytest.raises(SystemExit, match="neither reading"):
        wh.reading_of({"zero_weight": "freeze", "zero_below": 0.0, "control": "increments"})


def test_committed_rows_are_kept_new_ones_added_and_a_disagreeing_rerun_refused() -> None:
    committed = [_row("stabilised", 2, 95.0, 95.0)]
    fresh = [_row("stabilised", 3, 97.0, 96.0), _row("stabilised", 2, 95.0, 95.0)]
    rows = wh.merged(committed, fresh)
    assert [(r["reading"], r["seed"]) for r in rows] == [("stabilised", 2), ("stabilised", 3)]
    with pytest.raises(SystemExit, match="rerun gives"):
        wh.merged(committed, [_row("stabilised", 2, 95.0, 94.0)])
