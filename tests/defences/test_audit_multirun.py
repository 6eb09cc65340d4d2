"""The multi-run audit: independent federations with one canary each, through a sweep backend.
A correct dp-fedavg stays at or below its claim (the held-out bound, on several seeds, and the
estimate's interval), what one run cannot catch is refuted by the bound of many, and chunking
the runs into backend tasks changes no bit."""

from __future__ import annotations

import pytest

from fedattack.audit.multirun import multirun_audit
from fedattack.audit.zoo import BUGS, with_bug
from fedattack.registry import UserError
from fedattack.target import Recipe
from tests.conftest import tiny_spec


def dp(sigma: float) -> tuple[dict[str, object], ...]:
    return ({"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": sigma}},)


def spec(defences: tuple[dict[str, object], ...], seed: int = 0):  # type: ignore[no-untyped-def]
    """One local batch a round: the canary's score reads the aggregates only, so runs are cheap."""
    return tiny_spec(num_clients=4, fraction=1.0, rounds=2, seed=seed, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=1024, lr=0.1), defences=defences)


@pytest.mark.parametrize("seed", [0, 1000, 2000])
def test_a_correct_dp_fedavg_is_not_audited_above_its_claim(seed: int) -> None:
    result = multirun_audit(spec(dp(1.0), seed), 80, backend="sequential")
    b = result["bound"]
    assert result["runs"] == 80 and result["in"] + result["out"] == 80
    assert b["tested_in"] + b["tested_out"] + b["choosing_runs"] == 80
    assert b["epsilon_of_mu"] <= result["claimed"]["epsilon"] and b["epsilon"] <= result["claimed"]["epsilon"]
    assert 0 < b["mu"] <= result["claimed_mu"], b  # sigma 1: strong enough to prove something
    assert result["estimate"]["low"] <= result["claimed_mu"]


@pytest.mark.parametrize("bug", [b for b in BUGS.names() if not BUGS.get(b).one_run])
def test_what_one_run_misses_the_bound_of_many_refutes(bug: str) -> None:
    """The Poisson figure stated for a fixed cohort: mu twice the claim's, refuted at 160 runs."""
    result = multirun_audit(spec(with_bug(dp(1.0), bug)), 160, backend="sequential")
    assert result["bound"]["epsilon_of_mu"] > result["claimed"]["epsilon"], result["bound"]
    assert result["estimate"]["low"] > result["claimed_mu"]


def test_chunks_change_no_bit() -> None:
    one = multirun_audit(spec(dp(1.0)), 12, backend="sequential", per_task=12)
    many = multirun_audit(spec(dp(1.0)), 12, backend="sequential", per_task=5)
    assert one["bound"] == many["bound"] and one["estimate"] == many["estimate"]


def test_too_few_runs_are_refused_in_one_line() -> None:
    with pytest.raises(UserError, match="at least 10 runs"):
        multirun_audit(spec(dp(1.0)), 4, backend="sequential")
