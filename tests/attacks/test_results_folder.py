"""One owner of an evaluation's folder (issue #42): the Python API refuses a folder that holds
results, as the command does, unless told to resume or replace, and `summary.json` covers every
result in the folder (the second call's summary covered only its own victims, `[4]`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fedattack
from fedattack.registry import UserError

CHEAP = dict(attacks="membership", aux_size=100, eval_size=0, max_queries=20,
             settings={"shadows": 1, "classifier": "logreg"})


def summarised(out: Path) -> list[str]:
    return sorted(json.loads((out / "summary.json").read_text())["results"])


def results_in(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("*-victim*.json"))


def test_the_api_twice_into_one_folder(fedavg_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    first = fedattack.evaluate(fedavg_run, out, victims=1, **CHEAP)
    assert [r.victim for r in first.results] == [1] and summarised(out) == results_in(out)
    kept = (out / "membership-eavesdropper-decoded-victim1.json").read_bytes()

    with pytest.raises(UserError, match="already holds 1 result.*resume.*replace|--resume"):
        fedattack.evaluate(fedavg_run, out, victims=4, **CHEAP)
    assert results_in(out) == ["membership-eavesdropper-decoded-victim1.json"]  # refused: nothing touched

    both = fedattack.evaluate(fedavg_run, out, victims=(1, 4), resume=True, **CHEAP)
    assert sorted(r.victim for r in both.results) == [1, 4]  # every result in the folder
    assert (out / "membership-eavesdropper-decoded-victim1.json").read_bytes() == kept  # skipped, not redone
    assert summarised(out) == results_in(out) == ["membership-eavesdropper-decoded-victim1.json",
                                                  "membership-eavesdropper-decoded-victim4.json"]
    groups = json.loads((out / "summary.json").read_text())["groups"]
    assert [g["victims"] for g in groups] == [[1, 4]]
    assert not (out / "incomplete.json").exists()

    replaced = fedattack.evaluate(fedavg_run, out, victims=4, replace=True, **CHEAP)
    assert [r.victim for r in replaced.results] == [4]
    assert summarised(out) == results_in(out) == ["membership-eavesdropper-decoded-victim4.json"]
    with pytest.raises(UserError, match="pass one"):
        fedattack.evaluate(fedavg_run, out, victims=4, resume=True, replace=True, **CHEAP)


def test_a_failed_first_victim_leaves_no_folder(fedavg_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "never"
    with pytest.raises(UserError):
        fedattack.evaluate(fedavg_run, out, victims=1, **{**CHEAP, "aux_size": 0})  # shadows need aux data
    assert not out.exists() and not list(tmp_path.iterdir())  # no folder, marker, staging or lock


def test_an_evaluation_builds_the_method_once(fedavg_run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #42 (3): planning and execution share what planning derived (views, observations,
    strategies) and the one method; it was rebuilt 9 times for 2 victims x 2 threat models."""
    from fedattack.target import Target

    built: list[str] = []
    init = Target.__init__

    def counted(self: Target, *args: Any, **kwargs: Any) -> None:
        built.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Target, "__init__", counted)
    fedattack.evaluate(fedavg_run, tmp_path / "out", threat_models=("eavesdropper", "oracle"), victims=(1, 4),
                       attacks=("membership", "inversion"), aux_size=100, eval_size=60, max_queries=20,
                       settings={"shadows": 1, "classifier": "logreg", "steps": 5})
    assert built == ["FedAvg"]


def test_a_resume_that_stops_before_a_victim_leaves_the_folder_as_it_found_it(fedavg_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    fedattack.evaluate(fedavg_run, out, victims=1, **CHEAP)
    unfinished = {"schema": "fedattack.incomplete/1", "status": "interrupted", "victims": [1, 4], "done": [1],
                  "missing": [4], "resume": "fedattack evaluate ... --resume", "replacing": []}
    (out / "incomplete.json").write_text(json.dumps(unfinished))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(UserError, match="refused before starting"):
        fedattack.evaluate(fedavg_run, out, victims=(1, 4), resume=True, memory=1, **CHEAP)  # no room at all
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert json.loads((out / "incomplete.json").read_text()) == unfinished
