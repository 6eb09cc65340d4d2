"""`fedattack experiment` end to end on a user's own tiny experiment file (real train, evaluate, report)."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

from fedattack.cli import cli

TINY = """
name = "tiny"
description = "two rounds of FedAvg on digits, one victim"
reproduces = ["waffle-ibp:table3"]
[[federation]]
method = "fedavg"
clients = 6
rounds = 2
fraction = 0.5
epochs = 1
record = "all"
[[evaluation]]
threat-models = ["eavesdropper"]
attacks = ["membership"]
victims = ["random:1"]
[evaluation.settings]
shadows = 1
"""


def test_user_experiment_runs_end_to_end_and_resumes(tmp_path: Path) -> None:
    exp = tmp_path / "tiny.toml"
    exp.write_text(TINY)
    out = tmp_path / "out"
    args = ["experiment", "run", str(exp), "--out", str(out), "--quiet"]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert "trained 1 federation(s) (reused 0), ran 1 evaluation(s)" in first.output
    rows = list(csv.DictReader((out / "report" / "tables" / "membership.csv").open()))
    assert [(r["method"], r["threat model"], r["n"]) for r in rows] == [("fedavg", "eavesdropper", "1")]
    paper = list(csv.DictReader((out / "report" / "tables" / "paper-waffle-ibp-table3.csv").open()))
    assert any(r["paper:accuracy"] == "83.85 ± 1.62" for r in paper)
    assert (out / "experiment.toml").read_text() == TINY
    second = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert "trained 0 federation(s) (reused 1), ran 0 evaluation(s) (reused 1)" in second.output


def test_experiment_list_shows_shipped_files() -> None:
    result = CliRunner().invoke(cli, ["experiment", "list"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "quick-digits" in result.output and "waffle-ibp:table3" in result.output
