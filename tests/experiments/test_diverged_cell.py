"""A sweep goes on past a federation that diverged: its cells are recorded as not applicable."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.results import AttackResult

# Two federations that differ only in lr: 1e30 turns the weights into NaN within the first round.
SWEEP = """
name = "diverging"
[[federation]]
method = "fedavg"
clients = 6
rounds = 2
fraction = 0.5
epochs = 1
record = "all"
[federation.grid]
lr = [1e30, 0.05]
[[evaluation]]
threat-models = ["eavesdropper"]
attacks = ["membership"]
victims = ["random:1"]
[evaluation.settings]
shadows = 1
"""


def results_of(out: Path) -> dict[float, list[AttackResult]]:
    found: dict[float, list[AttackResult]] = {}
    for path in sorted((out / "results").rglob("membership-*.json")):
        result = AttackResult.load(path)
        lr = 1e30 if "diverged" in result.note else 0.05
        found.setdefault(lr, []).append(result)
    return found


def test_a_diverged_cell_is_not_applicable_and_the_sweep_goes_on(tmp_path: Path) -> None:
    exp = tmp_path / "diverging.toml"
    exp.write_text(SWEEP)
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["experiment", "run", str(exp), "--out", str(out), "--quiet",
                                    "--backend", "sequential"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "trained 2 federation(s) (reused 0), ran 2 evaluation(s)" in done.output
    found = results_of(out)
    assert [r.applicable for r in found[1e30]] == [False]
    assert found[1e30][0].note.startswith("diverged during training (NaN or infinite weights in ")
    assert [r.applicable for r in found[0.05]] == [True] and "auc" in found[0.05][0].metrics
    report = (out / "report" / "report.md").read_text()
    assert "not applicable: diverged during training" in report
    rows = list(csv.DictReader((out / "report" / "tables" / "membership.csv").open()))
    assert rows, "the live cell still has its row"
