"""Issue #49 item 6: training that ends at chance says so in one line.

`fedattack train --dataset digits --model cifar-cnn` once ended at 11.03% with no word. The line
compares the mean local test accuracy with always guessing one class, the clients' most common.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fedattack.cli import cli
from fedattack.commands.train_cmd import at_chance
from fedattack.federation.rundir import Federation


def train(tmp_path: Path, *options: str) -> tuple[Path, str]:
    out = tmp_path / "run"
    done = CliRunner().invoke(cli, ["train", "--dataset", "digits", "--rounds", "2", "--out", str(out), "--quiet",
                                    *options])
    assert done.exit_code == 0, done.output
    return out, done.output


def test_a_federation_that_learnt_nothing_says_so(tmp_path: Path) -> None:
    out, printed = train(tmp_path, "--lr", "1e-9", "--partition", "iid")
    lines = [x for x in printed.splitlines() if x.startswith("warning: training ended at chance")]
    assert len(lines) == 1, printed
    assert "the model did not learn (check --model digits-mlp for digits, --lr" in lines[0]


def test_a_federation_that_learnt_is_not_warned_about(tmp_path: Path) -> None:
    out, printed = train(tmp_path, "--partition", "iid")
    assert "chance" not in printed and at_chance(Federation(out), None) == ""
