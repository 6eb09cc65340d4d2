"""Backends: the same sweep gives the same bytes one after another and in worker processes; a
failing cell is one line naming it; Ctrl-C leaves no partial cell. Workers are spawned processes,
so the fake trainers here are module-level functions (a worker imports this module to find them)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest

from fedattack.atomic import staging_dir
from fedattack.experiments.backends import Backend, CellFailed, Outcome, Task, make_backend, run_tasks
from fedattack.experiments.backends.base import available_cores
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


def sweep(out: Path, backend: str, train=train_federation, workers: int | None = 2,  # type: ignore[no-untyped-def]
          seeds: str = "[0, 1]"):
    exp = parse(tomllib.loads(TWO_FEDERATIONS.replace("[0, 1]", seeds)))
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


def probing_trainer(spec, out, *args):  # type: ignore[no-untyped-def]
    """Says where the cell ran and with how many torch threads, instead of training; then waits
    (up to a minute) until cells have run in two processes, so the spawned worker gets one."""
    import torch
    Path(out).mkdir(parents=True)
    seen = {"pid": os.getpid(), "threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads()}
    (Path(out) / "where.tmp").write_text(json.dumps(seen))
    os.replace(Path(out) / "where.tmp", Path(out) / "where.json")  # whole when the other process reads it
    deadline = time.monotonic() + 60
    while len({s["pid"] for s in where_cells_ran(Path(out).parent.parent)}) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


def where_cells_ran(out: Path) -> list[dict[str, int]]:
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/where.json"))]


def test_this_process_is_one_of_the_workers_and_each_uses_its_share_of_the_cores(tmp_path: Path) -> None:
    assert sweep(tmp_path, "local", probing_trainer, workers=2, seeds="[0, 1, 2, 3]").trained == 4
    seen = where_cells_ran(tmp_path)
    pids = {s["pid"] for s in seen}
    assert len(seen) == 4 and os.getpid() in pids and len(pids) == 2  # one process spawned, not two
    assert {s["threads"] for s in seen} == {max(1, available_cores() // 2)}
    assert all(s["interop"] == 1 for s in seen if s["pid"] != os.getpid())


def quick_probe(spec, out, *args):  # type: ignore[no-untyped-def]
    Path(out).mkdir(parents=True)
    (Path(out) / "where.json").write_text(json.dumps({"pid": os.getpid()}))


def test_one_worker_runs_every_cell_in_this_process(tmp_path: Path) -> None:
    assert sweep(tmp_path, "local", quick_probe, workers=1, seeds="[0, 1, 2]").trained == 3
    assert {s["pid"] for s in where_cells_ran(tmp_path)} == {os.getpid()}


class FirstFailsAtOnce(Backend):
    """Two slots; the first task fails while the second is submitted but not started."""

    def __init__(self) -> None:
        super().__init__(workers=2)
        self.queue: list[Task] = []
        self.ran: list[str] = []

    def submit(self, task: Task, alone: bool) -> None:
        self.queue.append(task)

    def next_done(self) -> tuple[Task, Outcome]:
        task = self.queue.pop(0)
        self.ran.append(task.label)
        return task, Outcome(0.0, "boom" if task.label == "a" else None)

    def drop_queued(self) -> int:
        dropped, self.queue = len(self.queue), []
        return dropped


def test_after_a_failure_no_queued_cell_starts(tmp_path: Path) -> None:
    backend = FirstFailsAtOnce()
    tasks = [Task(label, tmp_path / label, lambda: None) for label in "abc"]
    with pytest.raises(CellFailed, match="a failed: boom"):
        run_tasks(backend, tasks, lambda task, outcome: None)
    assert backend.ran == ["a"]


def once_killed_trainer(spec, out, *args):  # type: ignore[no-untyped-def]
    """Notes each attempt; a first attempt in a spawned worker waits there to be killed, and one in
    the command's process waits (up to a minute) until the worker has a cell, so that it gets one."""
    import multiprocessing

    folder = Path(out).parent
    folder.mkdir(parents=True, exist_ok=True)
    attempt = len(list(folder.glob(f"attempt-{spec.seed}-*"))) + 1
    (folder / f"attempt-{spec.seed}-{attempt}-{os.getpid()}").touch()
    if attempt == 1 and multiprocessing.parent_process() is not None:
        time.sleep(120)  # the test kills this worker meanwhile
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(not p.name.endswith(f"-{os.getpid()}")
                                                  for p in folder.glob("attempt-*")):
        time.sleep(0.05)
    return train_federation(spec, out, progress=False)


def test_a_cell_whose_worker_is_killed_runs_again(tmp_path: Path) -> None:
    """Issue #39: a spawned worker killed with SIGKILL failed the whole sweep (rc 2)."""
    def kill_the_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for marker in (tmp_path / "runs").glob("attempt-*-1-*") if (tmp_path / "runs").is_dir() else []:
                pid = int(marker.name.rsplit("-", 1)[1])
                if pid != os.getpid():
                    os.kill(pid, signal.SIGKILL)
                    return
            time.sleep(0.05)

    threading.Thread(target=kill_the_worker, daemon=True).start()
    summary = sweep(tmp_path, "local", once_killed_trainer, workers=2)
    assert summary.trained == 2
    attempts = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "runs").glob("attempt-*"))
    killed = [a for a in attempts if a.endswith("-1") and attempts.count(a[:-1] + "2") == 1]
    assert len(killed) == 1, attempts  # the killed cell ran a second time, the other once
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith("attempt-")) == \
        sorted(p.name for p in (tmp_path / "runs").iterdir() if "-s" in p.name and not p.name.startswith("attempt"))
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".")]  # nothing staged is left



PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "clip_defence.py"


def plugin_probe(spec, out, *args):  # type: ignore[no-untyped-def]
    """Says in which process the cell ran and whether the plugin's defence was registered there;
    waits (up to a minute) until cells have run in two processes, so the spawned worker gets one."""
    from fedattack.defences import DEFENCES

    Path(out).mkdir(parents=True)
    seen = {"pid": os.getpid(), "registered": "clip-uplink" in DEFENCES.registered()}
    (Path(out) / "where.tmp").write_text(json.dumps(seen))
    os.replace(Path(out) / "where.tmp", Path(out) / "where.json")
    deadline = time.monotonic() + 60
    while len({s["pid"] for s in where_cells_ran(Path(out).parent.parent)}) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.usefixtures("isolated_registries")
def test_every_worker_loads_the_plugin_files_the_command_was_given(tmp_path: Path) -> None:
    """`experiment run --plugin FILE` (issue #39): a cell in a spawned worker finds the plugin's defence."""
    from fedattack.registry import load_plugin_file

    load_plugin_file(str(PLUGIN))
    stack = 'defences = ["clip-uplink:max_norm=0.5"]\n'
    with_plugin = TWO_FEDERATIONS.replace("[federation.grid]", stack + "[federation.grid]")
    exp = parse(tomllib.loads(with_plugin))
    run_experiment(exp, tmp_path, evaluate=None, report=None, train=plugin_probe, echo=lambda _: None,
                   progress=False, backend=make_backend("local", 2), plugins=(str(PLUGIN),))
    seen = where_cells_ran(tmp_path)
    assert len({s["pid"] for s in seen}) == 2 and all(s["registered"] for s in seen), seen
