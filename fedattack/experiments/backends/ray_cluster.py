"""Each cell a Ray task: the same sweep on a local Ray instance or across a cluster.

`--address` joins a running cluster (`ray start --head` on one node, `ray start --address=...`
on the others; `auto` finds the one this node belongs to); without it a local instance with
`--workers` CPUs is started and stopped again. Each task asks for `CPUS_PER_TASK` CPU (torch is
set to that many threads) and is retried `MAX_RETRIES` times if its worker or node dies; a
failure inside the task is a result, not retried. Tasks write straight into the experiment's
output folder, which on a cluster must be storage every node sees at the same path: a task on a
node that dies leaves only a hidden staged folder, which the next run removes before redoing the
cell, so a half-written cell is never visible. Ray is the optional extra `fedattack[ray]`.
An `--address HOST:PORT` is tried with a plain TCP connection first, before Ray or the output
folder is touched: where nothing listens Ray would retry for minutes and print a page of logs.
"""

from __future__ import annotations

import importlib.util
import socket
from typing import Any

from fedattack.experiments.backends.base import Backend, Outcome, Task, execute
from fedattack.registry import UserError

CPUS_PER_TASK = 1
MAX_RETRIES = 3
CONNECT_SECONDS = 5.0
NO_RAY = "--backend ray needs Ray: pip install 'fedattack[ray]'"


class RayBackend(Backend):
    """Each cell a Ray task (1 CPU, retried if its node dies), on a local Ray or a cluster."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        super().__init__(workers, address)
        if importlib.util.find_spec("ray") is None:  # said before anything starts or is written
            raise UserError(NO_RAY)
        if address is not None:
            reachable(address)
        self.asked_workers = workers
        self.started_here = False
        self.pending: dict[Any, Task] = {}
        self.remote: Any = None

    def start(self) -> None:
        ray = _import_ray()
        if not ray.is_initialized():  # a caller (a notebook, a test) may have joined one already
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address is None:
                options["num_cpus"] = self.workers
            try:
                ray.init(address=self.address, **options)
            except Exception as exc:  # Ray raises bare Exception, e.g. for a raylet that starts too slowly
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UserError(f"could not start or join Ray at {self.address or 'a local instance'}: {first}"
                                " (Ray gives its node a fixed time to start: try again on a quieter machine)") from None
            self.started_here = True
        self.remote = ray.remote(num_cpus=CPUS_PER_TASK, max_retries=MAX_RETRIES)(execute)

    @property
    def slots(self) -> int:
        """Tasks queued at once: the cluster's CPUs (Ray queues the rest itself), or --workers."""
        if self.asked_workers or self.remote is None:
            return self.workers
        cpus = _import_ray().cluster_resources().get("CPU", 1)
        return max(1, int(cpus // CPUS_PER_TASK))

    def submit(self, task: Task, alone: bool) -> None:
        self.pending[self.remote.remote(task, CPUS_PER_TASK)] = task

    def next_done(self) -> tuple[Task, Outcome]:
        ray = _import_ray()
        while True:  # short waits, so Ctrl-C is seen promptly
            ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=0.5)
            if ready:
                task = self.pending.pop(ready[0])
                try:
                    return task, ray.get(ready[0])
                except ray.exceptions.RayError as exc:  # retries used up: the worker or node kept dying
                    lines = str(exc).strip().splitlines()
                    return task, Outcome(0.0, f"Ray gave up on it: {lines[0] if lines else type(exc).__name__}")

    def stop(self, abort: bool) -> None:
        ray = _import_ray()
        if abort:
            for ref in self.pending:
                ray.cancel(ref, force=True)
        self.pending.clear()
        if self.started_here:
            ray.shutdown()
            self.started_here = False


def reachable(address: str) -> None:
    """Refuse, in one line, a HOST:PORT where nothing accepts a connection (`auto` and `ray://`
    addresses are left to Ray)."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379) or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(f"no Ray cluster answers at --address {address} ({reason}); start one there with "
                        "`ray start --head`, or leave --address out for a local Ray instance") from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(NO_RAY) from None
    return ray

