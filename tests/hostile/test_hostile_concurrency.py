"""Two writers to one output at once, and outputs that change under a writer (issue #13).

The first writer is a real `fedattack` process (started by the session fixture `busy`); the
second, run while the first works, is refused in one line naming the first's pid. A lock left
by a process that died is taken over; a folder that appears at `--out` while training is kept.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from fedattack.federation import train as train_module
from tests.hostile._cli import Scene, Workspace, log, refused

SECOND = {
    "second-train-to-the-same-out": "train",
    "second-train-overwrite-to-the-same-out": "train",
    "second-evaluate-to-the-same-out": "resume",
    "second-evaluate-without-resume-to-the-same-out": "evaluate",  # issue #39: it was accepted
}


@pytest.mark.parametrize("label, scene_name", SECOND.items(), ids=SECOND.keys())
def test_a_second_writer_is_refused_while_the_first_works(busy: dict[str, Scene], label: str,
                                                           scene_name: str) -> None:
    outcome = busy[scene_name].second[label]
    log(outcome)
    refused(outcome, "another fedattack process (pid")


TRAIN = ("train", "--dataset", "digits", "--rounds", "1", "--epochs", "1", "--clients", "4", "--quiet",
         "--out", "new-run")


def test_a_folder_that_appears_while_training_is_kept(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    real = train_module.run_rounds

    def and_meanwhile(*args: Any, **kwargs: Any) -> Any:
        (ws.root / "new-run").mkdir()
        (ws.root / "new-run" / "mine.txt").write_text("made while fedattack trained")
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "run_rounds", and_meanwhile)
    ws.seal()
    refused(ws.fedattack(*TRAIN), "appeared while fedattack was writing it")
    assert [p.name for p in (ws.root / "new-run").iterdir()] == ["mine.txt"]
    assert (ws.root / "new-run" / "mine.txt").read_text() == "made while fedattack trained"
    shutil.rmtree(ws.root / "new-run")  # the user's own, checked above; the rest is as it was
    ws.unchanged()


@pytest.mark.parametrize("content", ["dead-pid", "not-a-pid"])
def test_a_stale_lock_is_taken_over(ws: Workspace, content: str) -> None:
    """A lock left by a process that died (or holding garbage) must not block the user forever."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    (ws.root / ".new-run.lock").write_text(str(proc.pid) if content == "dead-pid" else "garbage\x00")
    done = ws.fedattack(*TRAIN)
    assert done.code == 0 and not done.lines, done.err
    assert (ws.root / "new-run" / "federation.json").is_file() and not (ws.root / ".new-run.lock").exists()
