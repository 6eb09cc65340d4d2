"""The evaluation's bar never runs past its total: calls' planned seconds are floats whose sum can
overshoot the plan's rounded total by a hair, and tqdm then prints a TqdmWarning ("clamping frac")
on the user's terminal, as a digits audit did (2026-12-02)."""

from __future__ import annotations

import random
import warnings

from fedattack.progress import reporting


def test_the_bar_stops_at_its_total_without_a_warning() -> None:
    rng = random.Random(0)
    for _ in range(200):
        parts = [rng.uniform(0.0, 9.0) * 10 ** rng.randint(-3, 1) for _ in range(rng.randint(1, 30))]
        planned = sum(parts) * rng.choice((0.5, 1.0, 1.0000001))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with reporting(planned, disable=False) as r:
                for p in parts:
                    with r.call("x", p):
                        pass
                assert r.bar.n <= r.bar.total
