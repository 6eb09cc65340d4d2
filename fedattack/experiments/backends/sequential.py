"""One task after another in this process: the reference every other backend must match."""

from __future__ import annotations

from fedattack.experiments.backends.base import Backend, Outcome, Task, execute


class SequentialBackend(Backend):
    """What `fedattack experiment run` did before backends existed, with progress bars."""

    name = "sequential"
    in_process = True

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(1, address)
        self.queue: list[Task] = []

    def submit(self, task: Task, alone: bool) -> None:
        self.queue.append(task)

    def next_done(self) -> tuple[Task, Outcome]:
        task = self.queue.pop(0)
        return task, execute(task, threads=None)  # this process keeps the threads it was given

