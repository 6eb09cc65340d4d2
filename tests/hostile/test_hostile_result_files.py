"""Damaged and forged result files (issue #13), each given to `fedattack report`.

A result file may come from anyone. Each one below is refused in one line naming the file (or,
inside a folder of results, skipped as not a result and said so), nothing of the user's changes,
no report folder appears, and an artifact that is a pickle is never executed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import torch

from fedattack import jsonfile
from fedattack.results import RESULT_SCHEMA
from tests.hostile._cli import MARKER, Planted, Workspace, refused

REPORT = ("report", "results/r.json", "-o", "rep", "--no-figures")


def good() -> dict[str, Any]:
    return {"schema": RESULT_SCHEMA, "attack": "membership", "threat_model": "eavesdropper",
            "run": {"method": "fedavg", "dataset": "digits"}, "victim": 1, "seed": 0,
            "metrics": {"accuracy": 0.55, "auc": 0.6}, "applicable": True}


def edited(change: Callable[[dict[str, Any]], Any]) -> str:
    data = good()
    change(data)
    return json.dumps(data)


BAD_RESULTS: dict[str, tuple[str | bytes, str]] = {
    "truncated": (json.dumps(good())[:40], "not valid JSON"),
    "empty": ("", "not valid JSON"),
    "binary-garbage": (bytes(range(256)) * 4, "not valid JSON"),
    "json-list": ("[1, 2]", "is not a fedattack result"),
    "wrong-schema": (edited(lambda r: r.update(schema="other.result/1")), "is not a fedattack result"),
    "no-schema": (edited(lambda r: r.pop("schema")), "is not a fedattack result"),
    "no-victim": (edited(lambda r: r.pop("victim")), "no 'victim'"),
    "victim-a-string": (edited(lambda r: r.update(victim="1")), "'victim' is not int"),
    "victim-negative": (edited(lambda r: r.update(victim=-3)), "victim"),
    "threat-model-a-list": (edited(lambda r: r.update(threat_model=["x"])), "'threat_model' is not str"),
    "attack-empty": (edited(lambda r: r.update(attack="")), "attack"),
    "metric-a-string": (edited(lambda r: r["metrics"].update(auc="0.9")), "not a number"),
    "metrics-a-list": (edited(lambda r: r.update(metrics=[0.9])), "'metrics' is not dict"),
    "curve-with-a-word": (edited(lambda r: r.update(curves={"roc_fpr": [0, "x"], "roc_tpr": [0, 1]})), "curve"),
    "curve-not-a-list": (edited(lambda r: r.update(curves={"roc_fpr": 0.5})), "curve"),
    "artifact-leaves-the-folder": (edited(lambda r: r.update(artifacts={"img": "../../etc/passwd"})),
                                   "leaves the result's folder"),
    "artifact-absolute-path": (edited(lambda r: r.update(artifacts={"img": "/etc/passwd"})),
                               "leaves the result's folder"),
    "nested-deeply": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("content, words", BAD_RESULTS.values(), ids=BAD_RESULTS.keys())
def test_a_bad_result_file_is_refused(ws: Workspace, content: str | bytes, words: str) -> None:
    (ws.root / "results").mkdir()
    (ws.root / "results" / "r.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    ws.seal()
    refused(ws.fedattack(*REPORT), "results/r.json", words)
    ws.unchanged()


def test_an_oversized_result_file_is_refused(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size bound (512 MiB) lowered for the test: a file over it is not read at all."""
    monkeypatch.setattr(jsonfile, "MAX_BYTES", 1000)
    (ws.root / "results").mkdir()
    (ws.root / "results" / "r.json").write_text(edited(lambda r: r.update(note="x" * 2000)))
    ws.seal()
    refused(ws.fedattack(*REPORT), "larger than")
    ws.unchanged()


def test_a_pickled_artifact_is_never_executed(ws: Workspace) -> None:
    """An image artifact is loaded with `weights_only=True`: the pickle is refused, not run, and
    the report shows a gap in the grid instead (by design: one broken image must not stop it)."""
    folder = ws.root / "results"
    folder.mkdir()
    torch.save({"images": Planted(ws.root / MARKER)}, folder / "r-recon.pt")
    data = edited(lambda r: r.update(attack="inversion", metrics={"psnr": 10.0},
                                     artifacts={"reconstructions": "r-recon.pt"}))
    (folder / "r.json").write_text(data)
    ws.seal()
    done = ws.fedattack("report", "results/r.json", "-o", "rep")
    assert done.code == 0 and not done.lines and "Traceback" not in done.out, done.err
    assert not (ws.root / MARKER).exists()
    ws.nothing_half_written()
    assert (ws.root / "rep" / "report.html").is_file()


BAD_OUT = {
    "out-is-a-file": (["-o", "notes.txt"], "is a file", 2),
    "out-under-a-file": (["-o", "notes.txt/rep"], "notes.txt", 1),
    "out-current-directory": (["-o", "."], "current directory", 2),
    "out-parent-directory": (["-o", ".."], "current directory", 2),
}


@pytest.mark.parametrize("extra, words, code", BAD_OUT.values(), ids=BAD_OUT.keys())
def test_report_never_writes_over_the_users_folders(ws: Workspace, extra: list[str], words: str,
                                                    code: int) -> None:
    (ws.root / "results").mkdir()
    (ws.root / "results" / "r.json").write_text(json.dumps(good()))
    (ws.root / "report.md").write_text("my own report")
    ws.seal()
    refused(ws.fedattack("report", "results/r.json", "--no-figures", *extra), words, code=code)
    ws.unchanged()


def test_a_reference_no_result_has_is_refused(ws: Workspace) -> None:
    """A mistyped --reference gave a verdict with no comparison and exit 0."""
    (ws.root / "results").mkdir()
    (ws.root / "results" / "r.json").write_text(json.dumps(good()))
    ws.seal()
    refused(ws.fedattack("report", "results/r.json", "--no-figures", "--reference", "fedavgg"),
            "--reference fedavgg", code=2)
    ws.unchanged()


def test_a_reference_the_results_hold_is_accepted(ws: Workspace) -> None:
    (ws.root / "results").mkdir()
    (ws.root / "results" / "r.json").write_text(json.dumps(good()))
    outcome = ws.fedattack(*REPORT, "--reference", "fedavg")
    assert outcome.code == 0, outcome
    assert (ws.root / "rep" / "report.md").is_file()
