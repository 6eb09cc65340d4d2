"""What every backend shares: the task a cell becomes, running one, and the scheduling loop.

A backend only decides *where* a task runs (this process, a pool of processes, a Ray cluster).
What a task does is fixed here: it fills one cell's folder through a staging sibling that is
renamed into place when complete (`train_federation`'s RunWriter, `staged_dir` for results), so
whichever worker runs it, and however it dies, a cell folder is either absent or whole. The
parent decides what to run (by looking at the disk) and gathers outcomes; workers never decide.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from fedattack.registry import Registry, UserError

BACKENDS: Registry[type[Backend]] = Registry("backend", "fedattack.experiments.backends")


@dataclass(frozen=True)
class Task:
    """One cell's work, picklable (a `functools.partial` of module-level functions)."""

    label: str                               # names the cell in progress lines and errors
    final: Path                              # the folder the task fills
    work: Callable[[], Any]
    imports: tuple[tuple[str, str], ...] = ()  # (kind, import path or plugin file) of user code to load first


@dataclass(frozen=True)
class Outcome:
    seconds: float
    error: str | None = None                 # one line; None when the cell is complete
    detail: str | None = None                # a traceback, for errors that are not the user's


def execute(task: Task, threads: int | None) -> Outcome:
    """Run `task` here (in whichever process or node the backend chose) and say how it went.

    Errors come back as values, not exceptions: an exception type the parent cannot unpickle,
    or one that Ray would retry as if the node had died, would hide the message. Interrupts
    (BaseException) still propagate.
    """
    if threads:
        import torch
        torch.set_num_threads(threads)
    from fedattack.experiments.plan import user_or_registered
    from fedattack.registry import load_plugin_file

    started = time.perf_counter()
    try:
        for kind, path in task.imports:
            load_plugin_file(path) if kind == "plugin" else user_or_registered(kind, path)
        task.work()
    except UserError as exc:
        return Outcome(time.perf_counter() - started, str(exc))
    except Exception as exc:  # a bug or a library failure: one line here, the traceback on disk
        return Outcome(time.perf_counter() - started, f"{type(exc).__name__}: {exc}", traceback.format_exc())
    return Outcome(time.perf_counter() - started)


class Backend:
    """Where tasks run. A context manager: entering starts workers, leaving stops them (killing
    them if an exception, e.g. Ctrl-C, is on its way out)."""

    name: ClassVar[str]                      # defining it registers the class (one file per backend)
    in_process: ClassVar[bool] = False       # progress bars only make sense in this process

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            BACKENDS.add(cls.name, cls)

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        if workers is not None and workers < 1:
            raise UserError(f"--workers {workers} must be at least 1")
        self.workers = workers or available_cores()
        self.address = address

    @property
    def slots(self) -> int:
        """How many tasks may run at once."""
        return self.workers

    def start(self) -> None:
        """Start workers (lazily is fine: a phase of one task may run in the parent)."""

    def stop(self, abort: bool) -> None:
        """Stop workers; `abort`: kill the ones still working (their cells stay staged)."""

    def submit(self, task: Task, alone: bool) -> None:
        """Start `task`; `alone`: it is the only task of its phase."""
        raise NotImplementedError

    def next_done(self) -> tuple[Task, Outcome]:
        """Wait for any submitted task to end."""
        raise NotImplementedError

    def drop_queued(self) -> int:
        """Forget submitted tasks that have not started (after a failure); how many there were."""
        return 0

    def __enter__(self) -> Backend:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop(abort=kind is not None)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_tasks(backend: Backend, tasks: Sequence[Task], done: Callable[[Task, Outcome], None]) -> None:
    """Run `tasks`, at most `backend.slots` at a time, calling `done` as each completes.

    After a failure nothing new starts; the running ones finish (their work is kept) and the
    first failure is raised as one line naming its cell.
    """
    queue, running, failure = list(tasks), 0, None
    while queue or running:
        while queue and running < backend.slots and failure is None:
            backend.submit(queue.pop(0), alone=len(tasks) == 1)
            running += 1
        if not running:
            break
        task, outcome = backend.next_done()
        running -= 1
        if outcome.error is None:
            done(task, outcome)
        elif failure is None:
            failure = (task, outcome)
            running -= backend.drop_queued()
    if failure is not None:
        raise CellFailed(*failure)


class CellFailed(UserError):
    def __init__(self, task: Task, outcome: Outcome) -> None:
        super().__init__(f"{task.label} failed: {outcome.error}")
        self.task, self.outcome = task, outcome


def make_backend(name: str, workers: int | None = None, address: str | None = None) -> Backend:
    cls = BACKENDS.get(name)
    if address is not None and name != "ray":
        raise UserError(f"--address joins a Ray cluster; it needs --backend ray, not {name}")
    return cls(workers=workers, address=address)
