"""The multi-run audit: independent federations with one canary each, through a sweep backend.
A correct dp-fedavg stays at or below its claim (bound and estimate's interval), the zoo bugs one
run cannot catch are refuted by the estimate of many, and the Clopper-Pearson bound is valid."""

from __future__ import annotations

import numpy as np
import pytest

from fedattack.audit.multirun import multirun_audit, threshold_bounds
from fedattack.audit.zoo import BUGS, with_bug
from fedattack.registry import UserError
from fedattack.target import Recipe
from tests.conftest import tiny_spec

DP = ({"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 2.0}},)
RUNS = 60


def spec(defences: tuple[dict[str, object], ...]):  # type: ignore[no-untyped-def]
    return tiny_spec(num_clients=4, fraction=1.0, rounds=2, seed=0, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=defences)


def test_a_correct_dp_fedavg_is_not_refuted() -> None:
    result = multirun_audit(spec(DP), RUNS, backend="sequential")
    assert result["runs"] == RUNS and result["in"] + result["out"] == RUNS
    assert result["bound"]["epsilon"] <= result["claimed"]["epsilon"]
    assert result["bound"]["mu"] <= result["claimed_mu"]
    assert result["estimate"]["low"] <= result["claimed_mu"] <= 1.6 * result["estimate"]["high"]


@pytest.mark.parametrize("bug", [b for b in BUGS.names() if not BUGS.get(b).one_run])
def test_what_one_run_misses_many_runs_refute(bug: str) -> None:
    result = multirun_audit(spec(with_bug(DP, bug)), RUNS, backend="sequential")
    assert result["estimate"]["low"] > result["claimed_mu"], (result["estimate"], result["claimed_mu"])


def test_the_threshold_bound_holds_where_the_truth_is_known() -> None:
    """Exact mu-GDP scores, 200 runs: the mu lower bound exceeds mu in at most 2 of 20 trials."""
    found = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        found.append(threshold_bounds(rng.normal(size=100) + 1.0, rng.normal(size=100), 1e-5, 0.95)["mu"])
    assert sum(f > 1.0 for f in found) <= 2 and np.mean(found) > 0.3, found


def test_too_few_runs_are_refused_in_one_line() -> None:
    with pytest.raises(UserError, match="at least 10 runs"):
        multirun_audit(spec(DP), 4, backend="sequential")
