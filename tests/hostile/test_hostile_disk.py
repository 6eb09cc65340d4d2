"""A full or read-only disk under each command that writes (issue #13).

A small tmpfs is mounted inside the user's folder (root only; skipped where it cannot be): a
full one (a filler file leaves a page or two) and a read-only one. Each command fails with
exit 1 and one line naming the cause and a fix, and leaves nothing on the disk but what was
there: no partial run, result, report, staging folder or lock.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedattack.results import RESULT_SCHEMA
from tests.hostile._cli import Workspace, refused

TRAIN = ("train", "--dataset", "digits", "--rounds", "1", "--epochs", "1", "--clients", "4", "--quiet",
         "--record", "all")
CHEAP = ("--attack", "membership", "--set", "shadows=1", "--set", "classifier=logreg", "--aux-size", "100",
         "--eval-size", "0", "--max-queries", "20", "--quiet")
EXPERIMENT = '[[federation]]\nmethod = "fedavg"\ndataset = "digits"\nrounds = 1\nclients = 4\n'
PAGE = 4096


@pytest.fixture
def disk(ws: Workspace, request: pytest.FixtureRequest) -> Iterator[Path]:
    """`ws/disk`: a 64 KiB tmpfs, full but for `request.param` pages, or read-only (param "ro")."""
    mount = ws.root / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        (mount / "filler").write_bytes(b"x" * (64 * 1024 - PAGE * (request.param if request.param != "ro" else 0)))
        if request.param == "ro":
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _results(ws: Workspace) -> None:
    (ws.root / "results").mkdir()
    data = {"schema": RESULT_SCHEMA, "attack": "membership", "threat_model": "eavesdropper", "victim": 0,
            "run": {"method": "fedavg", "dataset": "digits"}, "metrics": {"auc": 0.6, "accuracy": 0.55}}
    (ws.root / "results" / "r.json").write_text(json.dumps(data))


def _experiment(ws: Workspace) -> None:
    (ws.root / "exp.toml").write_text(EXPERIMENT)


CASES = {
    "full-disk-train": (2, TRAIN + ("--out", "disk/run"), None, "disk is full"),
    "full-disk-evaluate": (2, ("evaluate", "run", "--victim", "VICTIM", "--out", "disk/results", *CHEAP),
                           None, "disk is full"),
    "full-disk-report": (1, ("report", "results", "-o", "disk/report", "--no-figures"), _results, "disk is full"),
    "full-disk-experiment": (3, ("experiment", "run", "exp.toml", "--out", "disk/exp", "--quiet"), _experiment,
                             "disk is full"),
    "read-only-train": ("ro", TRAIN + ("--out", "disk/run"), None, "read-only"),
    "read-only-evaluate": ("ro", ("evaluate", "run", "--victim", "VICTIM", "--out", "disk/results", *CHEAP),
                           None, "read-only"),
    "read-only-report": ("ro", ("report", "results", "-o", "disk/report", "--no-figures"), _results, "read-only"),
    "read-only-experiment": ("ro", ("experiment", "run", "exp.toml", "--out", "disk/exp", "--quiet"), _experiment,
                             "read-only"),
}


@pytest.mark.parametrize("disk, args, setup, words", CASES.values(), ids=CASES.keys(), indirect=["disk"])
def test_a_full_or_read_only_disk_is_one_line_and_leaves_nothing(ws: Workspace, run: Path, disk: Path,
                                                                 args: tuple[str, ...], setup: object,
                                                                 words: str) -> None:
    if callable(setup):
        setup(ws)
    victim = json.loads((run / "transcript" / "index.json").read_text())[-1]["sender"]
    ws.seal()
    refused(ws.fedattack(*(str(victim) if a == "VICTIM" else a for a in args)), words, code=1)
    if args[0] == "experiment" and (disk / "exp").exists():  # resumable: the plan's record stays
        assert not list((disk / "exp").glob("runs/*")) and not list((disk / "exp").glob("results/*"))
        shutil.rmtree(disk / "exp")
    ws.unchanged()
    assert shutil.disk_usage(disk).total > 0
