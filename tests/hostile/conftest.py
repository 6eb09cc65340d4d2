"""Fixtures of the hostile-input tests: a user's workspace, and a copy of one tiny digits run."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.hostile._cli import Scene, Workspace, fedattack, finish, old_result, spawn, working


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """The user's folder (also the working directory of every command the test runs)."""
    return Workspace(tmp_path / "ws")


@pytest.fixture
def run(ws: Workspace, fedavg_run: Path) -> Path:
    """A copy of the session's digits run (tests/conftest.py, trained once) inside the workspace."""
    return Path(shutil.copytree(fedavg_run, ws.root / "run"))


LONG_TRAIN = ("train", "--dataset", "digits", "--clients", "4", "--rounds", "100000", "--epochs", "1", "--quiet")
LONG_EVALUATE = ("evaluate", "run", "--attack", "membership", "--victim", "all", "--set", "shadows=64", "--quiet")


@pytest.fixture(scope="session")
def busy(tmp_path_factory: pytest.TempPathFactory, fedavg_run: Path) -> dict[str, Scene]:
    """Long `train`/`evaluate` processes, started together (their start-up overlaps on 2 cores):
    as soon as each works, a second writer to its output is tried in this process, then it gets
    SIGINT or SIGTERM. test_hostile_concurrency and test_hostile_interrupts check the outcomes."""
    plans = {  # name: (command, what appears once it works, signal, what the workspace holds)
        "train": (LONG_TRAIN + ("--out", "new-run"), ".new-run.partial-*", signal.SIGINT, ""),
        "overwrite": (LONG_TRAIN + ("--out", "run", "--overwrite"), ".run.partial-*", signal.SIGTERM, "run"),
        "resume": (LONG_EVALUATE + ("--out", "results", "--resume"), ".results.partial-*", signal.SIGTERM,
                   "run+result"),
        "evaluate": (LONG_EVALUATE + ("--out", "results"), ".results.partial-*", signal.SIGTERM, "run"),
    }
    scenes, procs = {}, {}
    for name, (args, _, _, holds) in plans.items():
        ws = Workspace(tmp_path_factory.mktemp(f"busy-{name}") / "ws")
        if "run" in holds:
            shutil.copytree(fedavg_run, ws.root / "run")
        if "result" in holds:
            old_result(ws.root / "results", victim=0)
        ws.seal()
        scenes[name], procs[name] = Scene(ws), spawn(*args, cwd=ws.root)
    try:
        waiting, deadline = dict(plans), time.monotonic() + 600
        while waiting:
            name = next((n for n, p in waiting.items() if working(procs[n], scenes[n].ws.root, p[1])), None)
            if name is None:
                assert time.monotonic() < deadline, f"{sorted(waiting)} never started working"
                time.sleep(0.05)
                continue
            args, _, signum, _ = waiting.pop(name)
            for label, second in SECOND_WRITERS.get(name, {}).items():
                scenes[name].second[label] = fedattack(*second, cwd=scenes[name].ws.root, record=False)
            procs[name].send_signal(signum)
            scenes[name].interrupted = finish(procs[name], args)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return scenes


SECOND_WRITERS = {
    "train": {"second-train-to-the-same-out": LONG_TRAIN + ("--out", "new-run"),
              "second-train-overwrite-to-the-same-out": LONG_TRAIN + ("--out", "new-run", "--overwrite")},
    "resume": {"second-evaluate-to-the-same-out": LONG_EVALUATE + ("--out", "results", "--resume")},
    "evaluate": {"second-evaluate-without-resume-to-the-same-out": LONG_EVALUATE + ("--out", "results")},
}

