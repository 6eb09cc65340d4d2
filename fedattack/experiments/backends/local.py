"""Independent cells side by side on this machine's cores (the default backend).

The command's own process is one of the `--workers`: it runs cells itself while `workers - 1`
spawned processes run the others, so a 2-worker sweep starts one new process, not two, and the
first cell starts at once in a process that has imported torch and fedattack already (a new
process spends seconds importing them: more than a short cell trains). A spawned worker is
handed its first cell only once it has started, and the next one the moment it finishes one;
the workers live for the whole experiment, training phase and evaluation phase. Workers are
started with the spawn context (a fork of a process holding torch's thread pools can
deadlock), and every cell, here or in a worker, runs with cores // workers torch threads (a
spawned worker also with one inter-op thread), so the workers together use the cores once
instead of oversubscribing them (measured here: several threads per process on a busy 2-core
machine ran 10x slower) and a cell's bytes do not depend on where it ran. Workers ignore
Ctrl-C: the parent catches it (in its own cell too), kills them and clears their staged
folders, so an interrupted sweep leaves whole cells or none. With one worker, or a phase of one
cell, everything runs here. A spawned worker that dies (killed, out of memory) breaks the pool,
which ends every cell then running in a worker: those cells are queued again (each at most
`MAX_RETRIES` times, as the Ray backend retries a task whose worker died; each clears its own
leftovers when it starts again) and a new pool is started; a cell whose workers keep dying is
one line naming it. A worker whose parent dies (the command killed with SIGKILL) exits within
a second instead of working on for no one (`_exit_with_parent`).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from fedattack.experiments.backends.base import Backend, Outcome, Task, available_cores, execute

MAX_RETRIES = 3  # times a cell is run again after its worker died (Ray's max_retries does the same)
DIED = "its worker process died (killed, or out of memory)"


def start_worker(threads: int, parent: int | None = None) -> None:
    """Runs once in every spawned worker, before its first cell: the parent owns Ctrl-C, the
    worker owns `threads` cores, and fedattack's cell code is imported here rather than inside
    the first cell's time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)  # nothing here runs ops side by side; only once per process
    except RuntimeError:
        pass
    import fedattack.experiments.runner  # noqa: F401  (and through it the federation code)


def _exit_with_parent(parent: int) -> None:
    """Exit as soon as the process that started this worker is gone (it was killed: no one will
    collect this worker's cell; what it staged is removed by the next run)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def ready() -> None:
    """A worker's first job: when it returns, the worker has started and can take a cell."""


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
    """Cells side by side: this process plus `workers - 1` spawned ones, cores // workers threads each.

    Every cell of a phase is queued here at once; a spawned worker is handed the next one the
    moment it has started or finished one (from the pool's own thread, so it never waits for
    this process to finish a cell), and this process takes the next one whenever it asks for an
    outcome and none is ready.
    """

    name = "local"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers, address)
        self.threads = max(1, available_cores() // self.workers)
        self.spawned = self.workers - 1      # this process is the other worker
        self.pool: ProcessPoolExecutor | None = None
        self.lock = threading.RLock()
        self.pending: deque[Task] = deque()  # cells no one has started
        self.alone: list[Task] = []          # a phase's only cell: this process, its own threads
        self.busy = 0                        # jobs handed to spawned workers and not yet back
        self.halted = False                  # after a failure or Ctrl-C: hand out nothing more
        self.cells: dict[Future[Outcome], Task] = {}
        self.ended: queue.Queue[Future[Outcome]] = queue.Queue()
        self.pools: dict[Future[Outcome], ProcessPoolExecutor] = {}  # the pool each cell was sent to
        self.retried: dict[int, int] = {}    # id(task) -> times it was queued again after its worker died

    @property
    def slots(self) -> int:
        """All of a phase's cells are queued here; this backend hands them out itself."""
        return 1 << 30

    def submit(self, task: Task, alone: bool) -> None:
        if alone:
            self.alone.append(task)
            return
        if self.spawned == 0:
            self.pending.append(task)
            return
        with self.lock:
            self.halted = False
            self.pending.append(task)
            if self.pool is None:
                self._start_pool()
        self._feed()

    def _start_pool(self) -> None:
        """Spawn the workers; each takes a cell once it has started (called with the lock held)."""
        self.pool = ProcessPoolExecutor(self.spawned, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=start_worker, initargs=(self.threads, os.getpid()))
        self.busy = 0
        for _ in range(self.spawned):
            self.busy += 1
            self.pool.submit(ready).add_done_callback(self._worker_free)

    def next_done(self) -> tuple[Task, Outcome]:
        if self.alone:
            task = self.alone.pop(0)
            return task, run_here(task, None)
        while True:
            try:  # a worker's outcome first, so run_tasks hears of a failure before this process starts more
                done = self._gathered(self.ended.get_nowait())
                if done is not None:
                    return done
                continue
            except queue.Empty:
                pass
            with self.lock:
                mine = self.pending.popleft() if self.pending else None
            if mine is not None:
                return mine, run_here(mine, self.threads)
            try:  # short waits, so Ctrl-C is seen promptly
                done = self._gathered(self.ended.get(timeout=0.5))
                if done is not None:
                    return done
            except queue.Empty:
                pass

    def _gathered(self, future: Future[Outcome]) -> tuple[Task, Outcome] | None:
        """A worker's outcome, or None when its worker died and the cell was queued again."""
        task, pool = self.cells.pop(future), self.pools.pop(future, None)
        if not isinstance(_exception(future), BrokenProcessPool):
            return task, _outcome(future)
        tries = self.retried.get(id(task), 0)
        if tries >= MAX_RETRIES:
            return task, Outcome(0.0, f"{DIED}, {tries + 1} times")
        self.retried[id(task)] = tries + 1
        with self.lock:
            if pool is not None and pool is self.pool and not self.halted:  # the first of its cells back
                pool.shutdown(wait=False, cancel_futures=True)
                self._start_pool()
            self.pending.appendleft(task)
        self._feed()
        return None

    def drop_queued(self) -> int:
        with self.lock:
            self.halted = True
            dropped = len(self.pending)
            self.pending.clear()
            return dropped

    def stop(self, abort: bool) -> None:
        self.drop_queued()
        self.alone.clear()
        pool, self.pool = self.pool, None
        if pool is None:
            return
        if abort:
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        self.cells.clear()
        self.pools.clear()
        self.busy = 0

    def _feed(self) -> None:
        """Hand pending cells to free workers (called here and from the pool's thread)."""
        with self.lock:
            while self.pending and self.busy < self.spawned and not self.halted and self.pool is not None:
                try:
                    future = self.pool.submit(execute, self.pending[0], self.threads)
                except (BrokenProcessPool, RuntimeError):  # the pool broke or stops: this process runs the rest
                    self.halted = True
                    return
                self.cells[future] = self.pending.popleft()
                self.pools[future] = self.pool
                self.busy += 1
                future.add_done_callback(self._cell_ended)

    def _worker_free(self, future: Future[None]) -> None:
        with self.lock:
            self.busy -= 1
        if not future.cancelled() and future.exception() is None:
            self._feed()

    def _cell_ended(self, future: Future[Outcome]) -> None:
        with self.lock:
            if self.pools.get(future) is self.pool:  # a replaced pool's cells no longer count
                self.busy -= 1
            self.ended.put(future)
            failed = future.cancelled() or future.exception() is not None or future.result().error is not None
        if not failed:
            self._feed()


def _exception(future: Future[Outcome]) -> BaseException | None:
    return None if future.cancelled() else future.exception()


def _outcome(future: Future[Outcome]) -> Outcome:
    try:
        return future.result()
    except BrokenProcessPool:
        return Outcome(0.0, DIED)
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
