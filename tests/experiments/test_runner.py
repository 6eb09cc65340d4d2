"""The experiment runner skips finished work, survives interruptions and never counts half-work."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from fedattack.experiments.runner import run_experiment
from fedattack.experiments.spec import parse
from fedattack.results import AttackResult

EXPERIMENT = """
name = "resume"
reproduces = ["waffle-ibp:table3"]
[[federation]]
methods = ["fedavg", "fedprox"]
seeds = [0, 1]
[[evaluation]]
threat-models = ["eavesdropper", "oracle"]
attacks = ["membership"]
"""


class Calls:
    """Fake train / evaluate / report that write the files the real ones would, and count."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.train = self.evaluate = self.report = 0
        self.fail_at = fail_at

    def trainer(self, spec, out, *args):  # type: ignore[no-untyped-def]
        self.train += 1
        out = Path(out)
        tmp = out.with_name(f".{out.name}.partial-x")
        tmp.mkdir(parents=True)
        manifest = {"schema_version": 1, "spec": spec.to_json(), "utility": {"mean": 50.0}, "complete": True}
        (tmp / "federation.json").write_text(json.dumps(manifest))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
        return out

    def evaluator(self, job, run_dir: Path, out: Path) -> None:  # type: ignore[no-untyped-def]
        self.evaluate += 1
        if self.fail_at is not None and self.evaluate == self.fail_at:
            (out / "half.json").write_text("{")  # an interrupted evaluation leaves junk behind
            raise KeyboardInterrupt
        AttackResult(attack="membership", threat_model="eavesdropper", run={"path": str(run_dir)}, victim=0,
                     metrics={"accuracy": 0.6}).save(out / "r.json")

    def reporter(self, inputs, out: Path, exp):  # type: ignore[no-untyped-def]
        self.report += 1
        self.papers = list(exp.reproduces)
        self.inputs = list(inputs)
        return out / "report.md"


def run(out: Path, calls: Calls):  # type: ignore[no-untyped-def]
    exp = parse(tomllib.loads(EXPERIMENT))
    return run_experiment(exp, out, train=calls.trainer, evaluate=calls.evaluator, report=calls.reporter,
                          echo=lambda _: None, progress=False)


def test_second_run_reuses_everything(tmp_path: Path) -> None:
    first = Calls()
    summary = run(tmp_path, first)
    assert (first.train, first.evaluate, first.report) == (4, 4, 1)
    assert summary.trained == 4 and summary.evaluated == 4
    assert first.papers == ["waffle-ibp:table3"]
    second = Calls()
    summary = run(tmp_path, second)
    assert (second.train, second.evaluate, second.report) == (0, 0, 1)  # the report is always rebuilt
    assert summary.reused_runs == 4 and summary.reused_results == 4


def test_interrupted_evaluation_resumes_where_it_stopped(tmp_path: Path) -> None:
    calls = Calls(fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, calls)
    results = tmp_path / "results"
    assert not list(results.rglob(".*partial*")), "a half-written evaluation must be removed"
    assert len(list(results.rglob("r.json"))) == 2
    again = Calls()
    run(tmp_path, again)
    assert (again.train, again.evaluate) == (0, 2)
    assert len(list(results.rglob("r.json"))) == 4 and not list(results.rglob("half.json"))


def test_incomplete_run_directory_is_trained_again(tmp_path: Path) -> None:
    run(tmp_path, Calls())
    victim = sorted((tmp_path / "runs").iterdir())[0]
    manifest = json.loads((victim / "federation.json").read_text())
    (victim / "federation.json").write_text(json.dumps({**manifest, "complete": False}))
    (victim.parent / f".{victim.name}.partial-old").mkdir()  # leftover of a killed training
    calls = Calls()
    run(tmp_path, calls)
    assert calls.train == 1 and calls.evaluate == 0
    assert not list((tmp_path / "runs").glob(".*partial*"))


def test_report_reads_only_this_experiments_outputs(tmp_path: Path) -> None:
    run(tmp_path, Calls())
    (tmp_path / "results" / "stranger").mkdir(parents=True)
    calls = Calls()
    run(tmp_path, calls)
    assert all("stranger" not in str(p) for p in calls.inputs)
    assert len(calls.inputs) == 4 + 4


def test_reused_cells_made_by_other_software_are_named(tmp_path: Path) -> None:
    """A cell's address ignores the code, so a rerun after an upgrade reuses the old cells:
    the runner says which of them another version made (cells it made itself say nothing)."""
    run(tmp_path, Calls())
    manifests = sorted((tmp_path / "runs").glob("*/federation.json"))
    old = {"fedattack": "0.0.9", "torch": "2.0.0", "python": "3.10.0"}
    manifest = json.loads(manifests[0].read_text())
    manifests[0].write_text(json.dumps({**manifest, "versions": old}))
    lines: list[str] = []
    exp = parse(tomllib.loads(EXPERIMENT))
    summary = run_experiment(exp, tmp_path, train=Calls().trainer, evaluate=Calls().evaluator,
                             report=Calls().reporter, echo=lines.append, progress=False)
    stale = [line for line in lines if "made by fedattack 0.0.9" in line]
    assert len(stale) == 1 and manifests[0].parent.name in stale[0]
    # the fake trainer records no software, so its other runs count as made by other software too;
    # the evaluations were written by this runner's evaluate_cell, which records it
    assert summary.other_software == 4
    assert all("made by" not in line for line in lines if line.startswith("[attack"))
