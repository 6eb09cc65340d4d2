"""Independent cells side by side on this machine's cores (the default backend).

The command's own process is one of the `--workers`: it runs cells itself while `workers - 1`
spawned processes run the others, so a 2-worker sweep starts one new process, not two, and the
first cell starts at once in a process that has imported torch and fedattack already (a new
process spends seconds importing them: more than a short cell trains). The spawned workers live
for the whole experiment, training phase and evaluation phase, and are handed a cell whenever
they free up. Workers are started with the spawn context (a fork of a process holding torch's
thread pools can deadlock), and every cell, here or in a worker, runs with cores // workers
torch threads (a spawned worker also with one inter-op thread), so the workers together use
the cores once instead of oversubscribing them (measured here: several threads per process on a busy 2-core machine ran
10x slower) and a cell's bytes do not depend on where it ran. Workers ignore Ctrl-C: the parent
catches it (in its own cell too), kills them and clears their staged folders, so an interrupted
sweep leaves whole cells or none. With one worker, or a phase of one cell, everything runs here.
A spawned worker that dies (killed, out of memory) breaks the pool; that is reported as one line
naming the cells it held.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from fedattack.experiments.backends.base import Backend, Outcome, Task, available_cores, execute


def start_worker(threads: int) -> None:
    """Runs once in every spawned worker, before its first cell: the parent owns Ctrl-C, the
    worker owns `threads` cores, and fedattack's cell code is imported here rather than inside
    the first cell's time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)  # nothing here runs ops side by side; only once per process
    except RuntimeError:
        pass
    import fedattack.experiments.runner  # noqa: F401  (and through it the federation code)


def run_here(task: Task, threads: int | None) -> Outcome:
    """A cell in this process, with the torch threads a worker would have (then restored);
    `threads` None: the ones this process was given (a phase of one cell, as `sequential`)."""
    import torch

    before = torch.get_num_threads()
    try:
        return execute(task, threads)
    finally:
        torch.set_num_threads(before)


class LocalBackend(Backend):
    """Cells side by side: this process plus `workers - 1` spawned ones, cores // workers threads each."""

    name = "local"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers, address)
        self.threads = max(1, available_cores() // self.workers)
        self.spawned = self.workers - 1      # this process is the other worker
        self.pool: ProcessPoolExecutor | None = None
        self.running: dict[Future[Outcome], Task] = {}
        self.here: list[tuple[Task, int | None]] = []  # cells this process runs itself, and their threads

    def submit(self, task: Task, alone: bool) -> None:
        if alone or len(self.running) >= self.spawned:
            self.here.append((task, None if alone else self.threads))
            return
        self.running[self._pool().submit(execute, task, self.threads)] = task

    def next_done(self) -> tuple[Task, Outcome]:
        finished = [f for f in self.running if f.done()]
        if finished:  # a worker's cell first, so it is handed the next one before this process works
            return self.running.pop(finished[0]), _outcome(finished[0])
        if self.here:
            task, threads = self.here.pop(0)
            return task, run_here(task, threads)
        while True:  # short waits, so Ctrl-C is seen promptly
            done, _ = wait(list(self.running), timeout=0.5, return_when=FIRST_COMPLETED)
            if done:
                future = done.pop()
                return self.running.pop(future), _outcome(future)

    def drop_queued(self) -> int:
        dropped, self.here = len(self.here), []
        return dropped

    def stop(self, abort: bool) -> None:
        self.here.clear()
        pool, self.pool = self.pool, None
        if pool is None:
            return
        if abort:
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        self.running.clear()

    def _pool(self) -> ProcessPoolExecutor:
        """The workers, started with the first cell handed to one and kept until `stop`."""
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.spawned, mp_context=context, initializer=start_worker,
                                            initargs=(self.threads,))
        return self.pool


def _outcome(future: Future[Outcome]) -> Outcome:
    try:
        return future.result()
    except BrokenProcessPool:
        return Outcome(0.0, "its worker process died (killed, or out of memory)")
    except Exception as exc:  # the task could not be sent to or returned from the worker
        return Outcome(0.0, f"{type(exc).__name__}: {exc}")


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the workers now (Python 3.14 has `terminate_workers`; before it, the pool's
    process table is the only handle on them)."""
    terminate = getattr(pool, "terminate_workers", None)
    if callable(terminate):
        terminate()
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        process.terminate()
    for process in list(getattr(pool, "_processes", {}).values()):
        process.join(timeout=5)
