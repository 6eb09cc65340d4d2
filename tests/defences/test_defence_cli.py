"""Defences from the command line: listed, recorded in the manifest, epsilon printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.defences import DEFENCES
from fedattack.federation.rundir import Federation

TINY = ["--dataset", "digits", "--clients", "6", "--fraction", "0.5", "--epochs", "1", "--rounds", "2",
        "--batch-size", "16", "--lr", "0.1", "--quiet"]


def test_list_shows_every_defence_with_its_settings() -> None:
    out = CliRunner().invoke(cli, ["list", "defences"]).output
    for name in DEFENCES.names():
        assert name in out
    assert "noise_multiplier=1.0" in out and "max_norm=1.0" in out


def test_train_records_the_accountant_and_prints_epsilon(tmp_path: Path) -> None:
    pytest.importorskip("dp_accounting")
    run = tmp_path / "run"
    result = CliRunner().invoke(cli, ["train", *TINY, "--out", str(run), "--defence",
                                      "dp-fedavg:noise_multiplier=2,clip_norm=0.5,delta=1e-6"])
    assert result.exit_code == 0, result.output
    (entry,) = Federation(run).manifest["defences"]
    assert entry["settings"] == {"clip_norm": 0.5, "noise_multiplier": 2.0, "noise": "server", "delta": 1e-6,
                                 "accountant": "rdp"}
    eps = entry["accounting"]["epsilon"]
    assert eps > 0 and f"dp-fedavg: epsilon {eps:.3g} at delta 1e-06" in result.output


def test_a_bad_setting_or_a_refused_method_is_one_line(tmp_path: Path) -> None:
    for args in (["--defence", "dp-fedavg:noise=nowhere"],
                 ["--method", "qffl", "--defence", "secure-aggregation"]):
        result = CliRunner().invoke(cli, ["train", *TINY, "--out", str(tmp_path / "r"), *args])
        assert result.exit_code != 0 and result.output.strip().count("\n") == 0, result.output
