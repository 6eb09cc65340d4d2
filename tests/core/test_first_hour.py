"""A new user's first hour (#37): what the commands say where they used to print nan% or nothing.

- clients without local test images: no "nan%" and no numpy warning; the utility says what was
  measured instead (the dataset's test split);
- `report` on run directories no one evaluated: a utility-only report, and a note to evaluate;
- `evaluate` given a results folder: one line pointing at `report`.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fedattack.cli import main
from fedattack.data import load_dataset
from fedattack.federation.rundir import Federation
from fedattack.federation.train import train_federation
from fedattack.metrics import describe_utility, utility_summary
from tests.conftest import tiny_spec
from tests.reports import fake_results


def command(*args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["fedattack", *args])
    try:
        main()
    except SystemExit as exit_info:
        return int(exit_info.code or 0)
    return 0


@pytest.mark.parametrize("executor", ["sequential", "batched"])
def test_clients_without_test_images_are_measured_on_the_test_split(tmp_path: Path, executor: str) -> None:
    spec = tiny_spec(partition="iid", partition_options={"test_fraction": 0.0}, executor=executor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" and friends fail the test
        path = train_federation(spec, tmp_path / "run", progress=False)
    fed = Federation(path)
    utility = fed.manifest["utility"]
    assert utility["clients_measured"] == 0 and "mean" not in utility
    digits = load_dataset("digits")
    assert utility["test_split_images"] == len(digits.y_test)
    target = fed.target()  # FedAvg: every client deploys the global model, so this is its test accuracy
    with torch.no_grad():
        logits = target.forward(target.deployed(fed.server_state(), {}), digits.x_test)
    correct = int((logits.argmax(1) == digits.y_test).sum())
    assert utility["test_split"] == 100 * correct / len(digits.y_test)
    said = describe_utility(utility, fed.num_clients)
    assert "nan" not in said and "not measured" in said and f"{utility['test_split']:.2f}%" in said
    history = json.loads((path / "metrics.json").read_text())
    assert history["final"] == utility


def test_the_command_line_says_what_it_measured_without_nan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code = command("train", "--dataset", "digits", "--partition", "iid", "--partition-opt", "test_fraction=0",
                   "--clients", "5", "--rounds", "1", "--quiet", "--out", str(tmp_path / "run"),
                   monkeypatch=monkeypatch)
    out, err = capsys.readouterr()
    assert code == 0 and "nan" not in out.lower() and "Warning" not in err
    assert "no client holds local test images" in out and "dataset's test split" in out


def test_clients_without_test_images_are_counted_out_not_averaged_in() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        groups = ["majority", "minority", "majority", "minority"]
        summary = utility_summary([0.5, float("nan"), 1.0, float("nan")], groups)
        none = utility_summary([float("nan")] * 3, [""] * 3)
    assert summary["clients_measured"] == 2 and summary["mean"] == 75.0 and summary["majority"] == 75.0
    assert "minority" not in summary and "gap" not in summary  # no minority client was measured
    assert describe_utility(summary, 4) == ("mean local test accuracy 75.00%, majority 75.00 over the 2 of 4 "
                                            "clients that hold test images")
    assert none == {"clients_measured": 0}
    assert "not measured" in describe_utility(none, 3) and "nan" not in describe_utility(none, 3)


def test_report_on_runs_without_results_says_to_evaluate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A utility-only report is legal (the reproduction pages make them), so it is written and
    the command succeeds; the note says how to get the attacks into it."""
    made = fake_results.make(tmp_path, with_inversion=False)
    runs = tmp_path / "runs"
    assert command("report", str(runs), "-o", str(tmp_path / "only-utility"), "--no-figures",
                   monkeypatch=monkeypatch) == 0
    err = capsys.readouterr().err
    assert (tmp_path / "only-utility" / "report.md").is_file()
    assert "no attack results" in err and "utility only" in err and "fedattack evaluate" in err
    assert f"fedattack report results/{sorted(runs.iterdir())[0].name}" in err

    assert command("report", str(tmp_path / "results"), "-o", str(tmp_path / "full"), "--no-figures",
                   monkeypatch=monkeypatch) == 0
    assert "note:" not in capsys.readouterr().err  # every run attacked: nothing to say

    lonely = runs / "never-attacked"
    fake_results.write_run(lonely, "fedprox", 0, np.random.default_rng(0))
    assert command("report", str(tmp_path / "results"), str(runs), "-o", str(tmp_path / "mixed"), "--no-figures",
                   monkeypatch=monkeypatch) == 0
    err = capsys.readouterr().err
    assert f"{lonely} has no attack results" in err and f"fedattack evaluate {lonely}" in err
    assert made.results


def test_evaluate_on_a_results_folder_points_at_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    fake_results.make(tmp_path, with_inversion=False)
    results = tmp_path / "results"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert command("evaluate", str(results), "--out", str(tmp_path / "new"), monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"fedattack report {results}" in err
    assert str(tmp_path / "runs" / "fedavg-s0") in err  # the run the results attacked
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_the_report_shows_what_was_measured_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "no-test-images"
    fake_results.write_run(run, "fedavg", 0, np.random.default_rng(0))
    manifest = json.loads((run / "federation.json").read_text())
    manifest["utility"] = {"clients_measured": 0, "test_split": 62.24, "test_split_images": 10000}
    (run / "federation.json").write_text(json.dumps(manifest))
    assert command("report", str(run), "-o", str(tmp_path / "rep"), "--no-figures", monkeypatch=monkeypatch) == 0
    table = (tmp_path / "rep" / "report.md").read_text()
    assert "test-split acc. (%), no local test images" in table and "62.24" in table and "nan" not in table
