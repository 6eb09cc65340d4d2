"""The audited epsilon (Steinke, Nasr and Jagielski 2023): the bound is valid where the truth is
known, never exceeds a correct DP run's accountant, and catches a DP-FedAvg with a planted bug."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fedattack.audit import AuditSpec, audit, audit_federation, epsilon_lower_bound, p_value
from fedattack.registry import UserError, load_plugin_file
from fedattack.target import Recipe
from tests.conftest import tiny_spec

BUGS = Path(__file__).with_name("planted_dp_bugs.py")
SIGMA = 8.0  # claimed epsilon ~1.5 over 2 rounds: below what 64 perfect guesses can show (~2.5)


def dp_spec(name: str, seed: int, noise: str = "server"):  # type: ignore[no-untyped-def]
    dp = {"name": name, "settings": {"clip_norm": 0.5, "noise_multiplier": SIGMA, "noise": noise}}
    return tiny_spec(num_clients=4, fraction=1.0, rounds=2, seed=seed, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=(dp,))


def test_perfect_guesses_give_the_closed_form_bound() -> None:
    # delta = 0: q^r = significance, epsilon = logit(q)
    q = 0.05 ** (1 / 100)
    assert epsilon_lower_bound(100, 100, 100, 0.0, 0.05) == pytest.approx(math.log(q / (1 - q)), abs=1e-3)
    assert p_value(100, 100, 50, 0.0, 0.0) > 0.5  # chance-level guesses reject nothing
    assert epsilon_lower_bound(100, 100, 50, 1e-5, 0.05) == 0.0
    assert p_value(100, 60, 55, 1.0, 1e-3) > p_value(100, 60, 55, 1.0, 0.0)  # delta only loosens


@pytest.mark.parametrize("true_eps", [0.5, 2.0])
def test_the_bound_never_exceeds_randomised_responses_epsilon(true_eps: float) -> None:
    """Randomised response is exactly eps-DP: a bound at 95% confidence exceeds its epsilon in
    at most 5% of runs (3 or more of 20 would have probability 7.5% at that rate, 4 or more 1.6%)."""
    keep = 1 / (1 + math.exp(-true_eps))
    found = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        included = rng.random(500) < 0.5
        answer = np.where(rng.random(500) < keep, included, ~included)
        found.append(audit(answer + rng.random(500) * 1e-3, included, 0.0, 0.95).epsilon)
    assert sum(e > true_eps for e in found) <= 3, found
    assert np.mean(found) > 0.4 * true_eps  # and it is not vacuous


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_correct_dp_run_is_never_audited_above_its_accountant(seed: int) -> None:
    result = audit_federation(dp_spec("dp-fedavg", seed), AuditSpec(level="client", canaries=64))
    claimed = result["claimed"]["epsilon"]
    assert 0.5 < claimed < 2.5  # the test has teeth: a perfect audit would exceed it
    for view in result["views"].values():
        assert view["epsilon"] <= claimed, view


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize(("bug", "noise"), [("planted-noiseless-dp", "server"),
                                            ("planted-clip-after-noise-dp", "client")])
def test_a_planted_dp_bug_is_audited_above_its_claim(bug: str, noise: str) -> None:
    load_plugin_file(str(BUGS))
    result = audit_federation(dp_spec(bug, 0, noise), AuditSpec(level="client", canaries=64))
    claimed = result["claimed"]["epsilon"]
    final = result["views"]["final"]
    assert final["auc"] > 0.9
    assert final["epsilon"] > claimed, (final, claimed)


def test_example_canaries_are_found_without_any_defence() -> None:
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=3, executor="batched",
                     recipe=Recipe(epochs=2, batch_size=16, lr=0.1))
    result = audit_federation(spec, AuditSpec(level="example", canaries=40))
    assert result["claimed"]["epsilon"] is None
    assert result["views"]["final"]["auc"] > 0.7  # mislabelled samples are memorised


def test_a_diverging_canary_run_is_refused_in_one_line() -> None:
    """NaN weights give NaN canary scores: the audit says so instead of crashing on the AUC."""
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=1e30))
    with pytest.raises(UserError, match="canary run diverged"):
        audit_federation(spec, AuditSpec(level="client", canaries=8))


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize(("weakness", "caught"), [(10.0, True), (2.0, False)], ids=["10x-caught", "2x-missed"])
def test_audit_power(weakness: float, caught: bool) -> None:
    """docs/defences.md, "What the audit can and cannot detect": with 1,024 canaries the audit
    catches server noise 10x too small (it claims sigma's 1.48) and misses noise 2x too small,
    whose true epsilon (3.19) is over twice the claim: one run's bound saturates below it."""
    load_plugin_file(str(BUGS))
    dp = {"name": "planted-weak-noise-dp",
          "settings": {"clip_norm": 0.5, "noise_multiplier": SIGMA, "weakness": weakness}}
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, seed=0, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=(dp,))
    result = audit_federation(spec, AuditSpec(level="client", canaries=1024))
    claimed = result["claimed"]["epsilon"]
    best = max(v["epsilon"] for v in result["views"].values())
    assert (best > claimed) is caught, (best, claimed)


def test_one_runs_bound_saturates_below_noise_twice_too_small() -> None:
    """With the best possible canary scores (each canary's exact Gaussian statistic), the bound
    for noise 2x too small stays below the claim however many canaries (the table's 0.64)."""
    mu = math.sqrt(2) / (SIGMA / 2)
    rng = np.random.default_rng(0)
    included = rng.random(65536) < 0.5
    bound = audit(rng.normal(size=65536) + mu * included, included, 1e-5).epsilon
    assert 0.4 < bound < 1.0  # claimed: 1.48
