"""Ctrl-C and SIGTERM while a command works (issue #13), sent to the real command in a process.

Each interrupted command exits 130 with one line, and leaves the user's folder as it was: no new
run, no staging folder or lock, an old run being replaced still whole, results already there
untouched. An evaluation keeps the victims it finished before the signal, whole, in a folder
marked incomplete so that --resume finishes it (issue #49); nothing else appears. The processes
are started together by the session fixture `busy` (tests/hostile/conftest.py), which sends
each its signal once it has started working.
"""

from __future__ import annotations

import pytest

from tests.hostile._cli import Scene, log, refused

KEEPS_FINISHED_VICTIMS = {"resume", "evaluate"}
INTERRUPTS = {  # Ctrl-C during a plain evaluate: tests/core/test_interrupts.py
    "sigint-during-train": "train",
    "sigterm-during-train-overwrite-keeps-the-old-run": "overwrite",
    "sigterm-during-evaluate-resume-keeps-old-results": "resume",
    "sigterm-during-evaluate-keeps-finished-victims": "evaluate",
}


@pytest.mark.parametrize("scene_name", INTERRUPTS.values(), ids=INTERRUPTS.keys())
def test_an_interrupted_command_exits_130_and_changes_nothing(busy: dict[str, Scene], scene_name: str) -> None:
    scene = busy[scene_name]
    assert scene.interrupted is not None
    log(scene.interrupted)
    refused(scene.interrupted, "interrupted", code=130)
    if scene_name in KEEPS_FINISHED_VICTIMS:
        scene.ws.kept_finished_victims()
    else:
        scene.ws.unchanged()
