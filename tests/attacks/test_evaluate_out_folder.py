"""`fedattack evaluate --out`: a non-empty folder is refused unless --resume or --force, and the
summary covers every result in the folder (it covered only the new ones, the report read all)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fedattack.cli import main

CHEAP = ["--attack", "membership", "--set", "shadows=1", "--set", "classifier=logreg",
         "--aux-size", "100", "--eval-size", "0", "--max-queries", "20", "--quiet"]


def evaluate(run: Path, out: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["fedattack", "evaluate", str(run), "--out", str(out), *CHEAP, *args])
    try:
        main()
    except SystemExit as exit_info:
        return int(exit_info.code or 0)
    return 0


def victims_in_summary(out: Path) -> list[str]:
    return sorted(json.loads((out / "summary.json").read_text())["results"])


def test_non_empty_out_needs_resume_or_force(fedavg_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    assert evaluate(fedavg_run, out, "--victim", "1", monkeypatch=monkeypatch) == 0
    assert "n=1" in capsys.readouterr().err  # one victim is said loudly
    assert victims_in_summary(out) == ["membership-eavesdropper-decoded-victim1.json"]

    assert evaluate(fedavg_run, out, "--victim", "4", monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--resume" in err and "--force" in err
    assert victims_in_summary(out) == ["membership-eavesdropper-decoded-victim1.json"]

    kept = out / "membership-eavesdropper-decoded-victim1.json"
    assert json.loads(kept.read_text())["extra"]["software"]["fedattack"]  # results say what made them
    first = kept.stat().st_mtime_ns
    assert evaluate(fedavg_run, out, "--victim", "1", "--resume", monkeypatch=monkeypatch) == 0
    said = capsys.readouterr().out
    assert "1 victim(s) already evaluated" in said and "other software" not in said
    result = json.loads(kept.read_text())
    result["extra"]["software"] = {"fedattack": "0.0.1", "torch": "2.0.0", "python": "3.10.0"}
    kept.write_text(json.dumps(result))  # as if an earlier version had written it
    first = kept.stat().st_mtime_ns
    assert evaluate(fedavg_run, out, "--victim", "1", "--victim", "4", "--resume", monkeypatch=monkeypatch) == 0
    said = capsys.readouterr().out
    assert "1 victim(s) already evaluated" in said and "1 of the results kept were made by other software" in said
    assert (out / "membership-eavesdropper-decoded-victim1.json").stat().st_mtime_ns == first  # skipped
    assert victims_in_summary(out) == ["membership-eavesdropper-decoded-victim1.json",
                                       "membership-eavesdropper-decoded-victim4.json"]

    assert evaluate(fedavg_run, out, "--victim", "4", "--force", monkeypatch=monkeypatch) == 0
    assert victims_in_summary(out) == ["membership-eavesdropper-decoded-victim4.json"]
    assert sorted(p.name for p in out.glob("*.json")) == ["membership-eavesdropper-decoded-victim4.json",
                                                          "plan.json", "summary.json"]


def test_resume_and_force_together_are_refused(fedavg_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate(fedavg_run, tmp_path, "--resume", "--force", monkeypatch=monkeypatch) == 2
    assert "pass one" in capsys.readouterr().err
