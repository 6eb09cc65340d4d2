"""`fedattack audit --white-box`, `--runs` and `--plant`: both bounds printed beside the claim, a
zoo bug planted into the run's spec, and bad input refused in one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from fedattack.target import Recipe
from tests.conftest import tiny_spec


@pytest.fixture(scope="module")
def dp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dp = {"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 8.0}}
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=(dp,))
    return train_federation(spec, tmp_path_factory.mktemp("dp") / "run", progress=False)


def audit(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["audit", *args], standalone_mode=False)


def test_white_box_prints_both_bounds_and_a_planted_bug_is_refuted(dp_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "wb.json"
    done = audit(str(dp_run), "--white-box", "--canaries", "64", "--out", str(out))
    assert done.exception is None, done.output
    assert "Gaussian DP" in done.output and "epsilon-delta" in done.output and "claimed epsilon" in done.output
    correct = json.loads(out.read_text())
    bugged = tmp_path / "bug.json"
    done = audit(str(dp_run), "--white-box", "--canaries", "64", "--plant", "bug-noise-missing", "--out", str(bugged))
    assert done.exception is None, done.output
    found = json.loads(bugged.read_text())
    assert found["claimed"]["defence"] == "bug-noise-missing"
    assert found["bounds"]["gdp"]["epsilon"] > found["claimed"]["epsilon"] >= correct["bounds"]["gdp"]["epsilon"]


def test_many_runs_print_the_held_out_gaussian_dp_bound_and_the_epsilon_delta_one(dp_run: Path,
                                                                                tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    done = audit(str(dp_run), "--runs", "12", "--backend", "sequential", "--out", str(out))
    assert done.exception is None, done.output
    assert "12 runs" in done.output and "Gaussian DP" in done.output and "assuming nothing" in done.output
    bound = json.loads(out.read_text())["bound"]
    assert bound["choosing_runs"] == 4 and bound["tested_in"] + bound["tested_out"] == 8


@pytest.mark.parametrize(("args", "says"), [
    (["--plant", "bug-nothing"], "unknown dp-bug"),
    (["--runs", "12", "--level", "example"], "drop --level example"),
    (["--white-box", "--canaries", "100000"], "at most"),
])
def test_bad_input_is_one_line_and_writes_nothing(dp_run: Path, tmp_path: Path, args: list[str], says: str) -> None:
    out = tmp_path / "a.json"
    done = audit(str(dp_run), "--white-box", *args, "--out", str(out))
    assert isinstance(done.exception, UserError) and says in str(done.exception), done.output
    assert "\n" not in str(done.exception) and not out.exists()
