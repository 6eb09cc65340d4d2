"""Validation lives in the model (issue #13): the Python API, experiment files and the CLI refuse
the same bad settings with the same one-line message naming what the user wrote."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from fedattack.cli import main
from fedattack.experiments.plan import plan
from fedattack.experiments.spec import parse
from fedattack.federation.spec import FederationSpec
from fedattack.registry import UserError
from fedattack.target import Recipe

BAD_SPEC: list[tuple[dict[str, Any], str]] = [
    ({"rounds": 0}, "rounds=0"), ({"rounds": 2.5}, "rounds=2.5"), ({"eval_every": 0}, "eval_every=0"),
    ({"fraction": 2.0}, "fraction=2.0"), ({"fraction": 0.0}, "fraction=0.0"),
    ({"fraction": float("nan")}, "fraction=nan"), ({"seed": -5}, "seed=-5"), ({"seed": 2**64}, "seed="),
    ({"num_clients": 0}, "clients=0"), ({"record": "sometimes"}, "recording policy"),
    ({"method": ""}, "method=''"), ({"hyper": [1, 2]}, "hyper"), ({"normalize": "zscore"}, "normalize='zscore'"),
]
BAD_RECIPE: list[tuple[dict[str, Any], str]] = [
    ({"lr": float("nan")}, "lr=nan"), ({"lr": float("inf")}, "lr=inf"), ({"lr": -1.0}, "lr=-1.0"),
    ({"lr": 0.0}, "lr=0.0"), ({"epochs": 0}, "epochs=0"), ({"batch_size": 0}, "batch_size=0"),
    ({"batch_size": "10"}, "batch_size='10'"),
]


@pytest.mark.parametrize("fields, words", BAD_SPEC)
def test_the_spec_refuses_bad_settings(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(UserError, match=words.replace("[", r"\[")):
        FederationSpec(**fields)


@pytest.mark.parametrize("fields, words", BAD_RECIPE)
def test_the_recipe_refuses_bad_settings(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(UserError, match=words):
        Recipe(**fields)


@pytest.mark.parametrize("key, value, words", [
    ("rounds", 0, "rounds=0"), ("batch-size", 0, "batch_size=0"), ("eval-every", 0, "eval_every=0"),
    ("epochs", 0, "epochs=0"), ("fraction", 2.0, "fraction=2.0"), ("lr", -1.0, "lr=-1.0"),
    ("rounds", "ten", "rounds"), ("seed", -5, "seed=-5"),
])
def test_an_experiment_file_refuses_them_alike(key: str, value: Any, words: str) -> None:
    exp = parse({"federation": [{"method": "fedavg", "dataset": "digits", key: value}]})
    with pytest.raises(UserError, match=words) as info:
        plan(exp)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("args, words", [
    (["--lr", "nan"], "lr=nan"), (["--lr", "inf"], "lr=inf"), (["--seed", "-5"], "seed=-5"),
    (["--record", "sometimes"], "recording policy"), (["--clients", "5000"], "5000 clients"),
    (["--device", "cuda"], "CUDA is not available"),
    (["--device", "cuda", "--executor", "sequential"], "sequential executor trains on the CPU only"),
])
def test_the_command_line_refuses_them_in_one_line(args: list[str], words: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", ["fedattack", "train", "--dataset", "digits", *args,
                                      "--out", str(out), "--quiet"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and words in err[0], err
    assert not out.exists() and not list(tmp_path.iterdir())
