"""Backends: the same sweep gives the same bytes one after another and in worker processes; a
failing cell is one line naming it; Ctrl-C leaves no partial cell. Workers are spawned processes,
so the fake trainers here are module-level functions (a worker imports this module to find them)."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest

from fedattack.atomic import staging_dir
from fedattack.experiments.backends import make_backend
from fedattack.experiments.runner import run_experiment
from fedattack.experiments.spec import parse
from fedattack.federation.train import train_federation
from fedattack.registry import UserError

TWO_FEDERATIONS = """
[[federation]]
method = "fedavg"
clients = 6
rounds = 2
fraction = 0.5
epochs = 1
record = "all"
[federation.grid]
seeds = [0, 1]
"""


def sweep(out: Path, backend: str, train=train_federation, workers: int | None = 2):  # type: ignore[no-untyped-def]
    exp = parse(tomllib.loads(TWO_FEDERATIONS))
    return run_experiment(exp, out, evaluate=None, report=None, train=train, echo=lambda _: None,
                          progress=False, backend=make_backend(backend, workers))


def digests(out: Path) -> dict[str, str]:
    """Every file of every run directory but the manifest (which holds the wall time)."""
    return {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted((out / "runs").rglob("*")) if f.is_file() and f.name != "federation.json"}


def test_local_backend_gives_the_bytes_of_the_sequential_one(tmp_path: Path) -> None:
    one = sweep(tmp_path / "sequential", "sequential")
    two = sweep(tmp_path / "local", "local")
    assert one.trained == two.trained == 2
    a, b = digests(tmp_path / "sequential"), digests(tmp_path / "local")
    assert len(a) >= 2 * 6 and a == b
    assert sweep(tmp_path / "local", "local").reused_runs == 2  # a rerun reuses every finished cell


def failing_trainer(spec, out, *args):  # type: ignore[no-untyped-def]
    if spec.seed == 1:
        raise ValueError("disk on fire")
    return train_federation(spec, out, progress=False)


def test_a_worker_error_is_one_line_naming_the_cell_and_the_others_finish(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        sweep(tmp_path, "local", failing_trainer)
    message = str(err.value)
    assert "seed 1" in message and "ValueError: disk on fire" in message and "\n" not in message
    assert "disk on fire" in next((tmp_path / "failures").iterdir()).read_text()  # the traceback is kept
    finished = [p.name for p in (tmp_path / "runs").iterdir()]
    assert len(finished) == 1 and "-s0-" in finished[0]


def hanging_trainer(spec, out, *args):  # type: ignore[no-untyped-def]
    stage = staging_dir(out)  # what a real trainer has on disk while it works
    (stage / "server.pt").write_bytes(b"half")
    (Path(out).parent / f"started-{spec.seed}").touch()
    time.sleep(60)


def test_ctrl_c_stops_the_workers_and_leaves_no_partial_cell(tmp_path: Path) -> None:
    interrupted: list[float] = []

    def interrupt_once_both_work() -> None:
        while len(list((tmp_path / "runs").glob("started-*"))) < 2:
            time.sleep(0.05)
        interrupted.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_both_work, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        sweep(tmp_path, "local", hanging_trainer)
    assert time.perf_counter() - interrupted[0] < 30  # the workers were killed, not waited for
    left = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert left == ["started-0", "started-1"]  # no cell, no staged folder, no lock
