"""Independent cells side by side in worker processes on this machine (the default backend).

Workers are started with the spawn context (a fork of a process holding torch's thread pools
can deadlock), and each sets torch to cores // workers threads so that the workers together
use the cores once instead of oversubscribing them (measured here: several threads per process
on a busy 2-core machine ran 10x slower). Workers ignore Ctrl-C: the parent catches it, kills
them and clears their staged folders, so an interrupted sweep leaves whole cells or none. A
phase of one task runs in the parent, since nothing could run beside it. A worker that dies
(killed, out of memory) breaks the pool; that is reported as one line naming the cells it held.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from fedattack.experiments.backends.base import Backend, Outcome, Task, available_cores, execute


def start_worker(threads: int) -> None:
    """Runs first in every worker: the parent owns Ctrl-C, the worker owns `threads` cores."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch
    torch.set_num_threads(threads)


class LocalBackend(Backend):
    """Cells side by side in worker processes on this machine, cores // workers threads each."""

    name = "local"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers, address)
        self.threads = max(1, available_cores() // self.workers)
        self.pool: ProcessPoolExecutor | None = None
        self.running: dict[Future[Outcome], Task] = {}
        self.here: list[Task] = []

    def submit(self, task: Task, alone: bool) -> None:
        if alone and self.pool is None:
            self.here.append(task)
            return
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=start_worker,
                                            initargs=(self.threads,))
        self.running[self.pool.submit(execute, task, self.threads)] = task

    def next_done(self) -> tuple[Task, Outcome]:
        if self.here:
            task = self.here.pop(0)
            return task, execute(task, threads=None)
        while True:  # short waits, so Ctrl-C is seen promptly
            done, _ = wait(list(self.running), timeout=0.5, return_when=FIRST_COMPLETED)
            if done:
                future = done.pop()
                return self.running.pop(future), _outcome(future)

    def stop(self, abort: bool) -> None:
        pool, self.pool = self.pool, None
        if pool is None:
            return
        if abort:
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        self.running.clear()


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

