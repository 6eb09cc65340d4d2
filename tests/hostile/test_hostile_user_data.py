"""Data the user already has (issue #39): results an evaluation must not rewrite or leave behind.

`evaluate --resume` into a folder where a crash left one result truncated re-runs that victim
but puts its other results back byte for byte; an `evaluate` killed with SIGKILL leaves its
hidden staging folder, which the next evaluation into the same folder removes and says so.
(The second `evaluate` into a busy --out is in test_hostile_concurrency; `experiment run --out`
and `audit --out` over a user's files in test_hostile_sweeps and test_hostile_defences.)
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, finish, old_result, refused, snapshot, spawn, working
from tests.hostile.conftest import LONG_EVALUATE

QUICK = ("evaluate", "run", "--attack", "membership", "--set", "shadows=1", "--set", "classifier=logreg",
         "--max-queries", "20", "--aux-size", "100", "--eval-size", "0", "--quiet", "--out", "results")


def test_resume_over_a_truncated_result_keeps_the_others(ws: Workspace, run: Path) -> None:
    first = ws.fedattack(*QUICK, "--threat-model", "eavesdropper", "--threat-model", "server",
                         "--victim", "0", "--victim", "1")
    assert first.code == 0, first.err
    results = sorted((ws.root / "results").glob("membership-*-victim0.json"))
    assert len(results) >= 2, results
    truncated, kept = results[0], results[1]
    truncated.write_bytes(truncated.read_bytes()[:100])  # a crash mid-write
    earlier = json.loads(kept.read_text())  # and the other result made by an earlier version: --resume keeps it
    earlier["extra"]["software"] = {"fedattack": "0.0.9", "torch": "2.0.0", "python": "3.10.0"}
    kept.write_text(json.dumps(earlier))
    before = {k: v for k, v in snapshot(ws.root / "results").items()
              if k not in (truncated.name, "summary.json", "plan.json")}  # the resumed run's own plan and summary
    done = ws.fedattack(*QUICK, "--threat-model", "eavesdropper", "--threat-model", "server",
                        "--victim", "0", "--victim", "1", "--resume")
    assert done.code == 0, done.err
    after = snapshot(ws.root / "results")
    assert {k: after.get(k) for k in before} == before  # victim 0's other results and victim 1's untouched
    assert truncated.read_text().rstrip().endswith("}")  # the truncated one evaluated again, whole
    assert not [p for p in ws.root.iterdir() if p.name.startswith(".")]


def test_a_killed_evaluation_leaves_a_staging_folder_the_next_one_removes(ws: Workspace, run: Path) -> None:
    args = (*LONG_EVALUATE, "--out", "results")
    proc = spawn(*args, cwd=ws.root)
    deadline = time.monotonic() + 240
    while not working(proc, ws.root, ".results.partial-*"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # no handler runs: the folder and the lock stay
    finish(proc, args)
    assert list(ws.root.glob(".results.partial-*")) and (ws.root / ".results.lock").exists()
    # --force: the kill may land after the first victim was published (its results kept, marked
    # incomplete), and then an evaluation into the folder without --resume or --force is refused
    done = ws.fedattack(*QUICK, "--victim", "0", "--force")
    assert done.code == 0, done.err
    assert "removed 1 staging folder(s) an earlier evaluation into results left when it was killed" in done.err
    assert not [p.name for p in ws.root.iterdir() if p.name.startswith(".")]  # no staging folder, no lock
    assert (ws.root / "results" / "summary.json").is_file()


def test_a_second_evaluate_started_while_the_first_works_is_refused_even_if_the_first_ends_meanwhile(
        ws: Workspace, run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #39: the second `evaluate` checked --out (empty), the first finished and published while
    the second opened the run, and the second then added its results to the first's, without
    --resume. It is refused now as soon as it starts, naming the first's pid."""
    import subprocess

    from fedattack.federation import rundir

    first = subprocess.Popen(["sleep", "60"])  # stands for the first evaluate, holding the lock
    (ws.root / ".results.lock").write_text(str(first.pid))
    real = rundir.Federation.__init__

    def the_first_finishes_meanwhile(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        old_result(ws.root / "results", victim=3)  # what the first evaluation published
        (ws.root / ".results.lock").unlink(missing_ok=True)
        real(self, *args, **kwargs)

    monkeypatch.setattr(rundir.Federation, "__init__", the_first_finishes_meanwhile)
    try:
        ws.seal()
        refused(ws.fedattack(*QUICK, "--victim", "0"), "another fedattack process", f"pid {first.pid}")
        ws.unchanged()
    finally:
        first.kill()
        first.wait()
