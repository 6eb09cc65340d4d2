"""The white-box audit on the zoo of DP bugs: every bug that one run can catch is audited above
the epsilon it states, a correct dp-fedavg never is (several seeds), and planting a bug lends it
to the defences' registry only while the audit runs."""

from __future__ import annotations

import numpy as np
import pytest

from fedattack.audit.whitebox import WhiteBoxSpec, coordinates, whitebox_audit
from fedattack.audit.zoo import BUGS, planted, with_bug
from fedattack.defences import DEFENCES
from fedattack.registry import UserError
from fedattack.target import Recipe
from tests.conftest import tiny_spec

DP = ({"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 8.0}},)
CANARIES = 256


def spec(defences: tuple[dict[str, object], ...], rounds: int = 2, seed: int = 0):  # type: ignore[no-untyped-def]
    return tiny_spec(num_clients=4, fraction=1.0, rounds=rounds, seed=seed, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=defences)


@pytest.mark.parametrize("bug", BUGS.names())
def test_every_bug_is_audited_above_its_claim(bug: str) -> None:
    cls = BUGS.get(bug)
    assert cls.wrong and cls.correct in DEFENCES and bug not in DEFENCES
    if not cls.one_run:
        pytest.skip(f"{bug} is caught by the multi-run audit (tests/defences/test_audit_multirun.py)")
    result = whitebox_audit(spec(with_bug(DP, bug), cls.rounds), WhiteBoxSpec(canaries=CANARIES))
    claimed = result["claimed"]["epsilon"]
    assert result["claimed"]["defence"] == bug and claimed is not None
    assert result["bounds"]["gdp"]["epsilon"] > claimed, (result["bounds"], claimed)
    assert bug not in DEFENCES  # lent for the audit only


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_correct_dp_fedavg_is_never_audited_above_its_claim(seed: int, accountant: str) -> None:
    """Also against the exact (PLD) claim, which has no slack for the audit to hide in."""
    dp = ({"name": "dp-fedavg", "settings": {**DP[0]["settings"], "accountant": accountant}},)  # type: ignore[dict-item]
    result = whitebox_audit(spec(dp, seed=seed), WhiteBoxSpec(canaries=CANARIES))
    claimed = result["claimed"]["epsilon"]
    for name in ("steinke", "gdp"):
        assert result["bounds"][name]["epsilon"] <= claimed, (name, result["bounds"], claimed)


def test_noise_far_too_small_separates_the_canaries_completely() -> None:
    """The score is the likelihood ratio: with sigma 0.05 every "in" canary outscores every "out"."""
    weak = ({"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 0.05}},)
    result = whitebox_audit(spec(weak), WhiteBoxSpec(canaries=64))
    gdp = result["bounds"]["gdp"]
    assert gdp["correct"] == gdp["guesses"] and gdp["epsilon"] > 2


def test_canaries_take_distinct_coordinates_and_too_many_are_refused() -> None:
    shapes = {"w": (3, 4), "b": (4,)}
    picked = coordinates(shapes, 16, seed=0)
    assert len(set(picked)) == 16 and sorted(np.unique([n for n, _ in picked])) == ["b", "w"]
    with pytest.raises(UserError, match="at most 16 canaries"):
        coordinates(shapes, 17, seed=0)


def test_canaries_share_a_coordinate_only_when_asked_and_at_most_k_each() -> None:
    shapes = {"w": (3, 4), "b": (4,)}
    shared = coordinates(shapes, 40, seed=0, per_coordinate=3)
    counts = np.unique([f"{n}{i}" for n, i in shared], return_counts=True)[1]
    assert len(counts) == 16 and counts.max() == 3 and counts.min() == 2
    assert shared[:16] == coordinates(shapes, 16, seed=0)  # the first 16 are the unshared draw
    with pytest.raises(UserError, match="at most 48 canaries"):
        coordinates(shapes, 49, seed=0, per_coordinate=3)


def test_shared_coordinates_still_audit_a_correct_dp_fedavg_within_its_claim() -> None:
    result = whitebox_audit(spec(DP), WhiteBoxSpec(canaries=5000, per_coordinate=2))
    gdp = result["bounds"]["gdp"]
    assert gdp["canaries"] == 5000 and gdp["epsilon"] <= result["claimed"]["epsilon"]


def test_planting_lends_a_bug_and_takes_it_back() -> None:
    before = DEFENCES.names()
    with planted("bug-noise-missing"):
        assert "bug-noise-missing" in DEFENCES
    assert DEFENCES.names() == before


def test_fedattack_list_shows_every_bug_with_what_it_gets_wrong() -> None:
    from click.testing import CliRunner

    from fedattack.audit.zoo import BUGS
    from fedattack.cli import cli

    done = CliRunner().invoke(cli, ["list", "dp-bugs"])
    assert done.exit_code == 0, done.output
    for name, cls in BUGS.items():
        assert cls.wrong and f"  {name}" in done.output and cls.wrong in done.output
