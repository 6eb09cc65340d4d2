"""Executors run the local updates of the clients sampled in a round.

The sequential executor is the reference: one client after another, each through its own
`client_update` (for most methods: `start_local`, `fedattack.training.sequential_train`,
`finish_local`). A faster executor registers itself in `EXECUTORS`, owns that sequence for
batchable targets, and must give the same result for the same seed. Anything that trains
clients of a method, a federation's or an attack's shadow and reference models, hands the
executor `ClientJob`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fedattack.metrics import accuracy
from fedattack.registry import Registry, UserError
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.training import Trainer, sequential_train
from fedattack.wire import Payload


@dataclass
class ClientJob:
    """One sampled client's work in a round."""

    client: int
    down: Payload
    private: State
    data: LocalData
    ctx: ClientContext


class Executor(Protocol):
    trainer: Trainer  # what a client's own `client_update` calls for its local SGD

    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]: ...

    def evaluate(self, target: Target, deployed: list[State], datas: list[LocalData]) -> list[float]:
        """Every client's local test accuracy with the model it deploys."""
        ...


EXECUTORS: Registry = Registry("executor", "fedattack.federation.executor_plugins")


@EXECUTORS.register("sequential")
class SequentialExecutor:
    """One client at a time (the reference every faster executor is checked against)."""

    trainer = staticmethod(sequential_train)

    def __init__(self, device: str = "cpu") -> None:
        if device != "cpu":  # it would silently train on the CPU
            raise UserError(f"the sequential executor trains on the CPU only; for --device {device} "
                            "use --executor batched")
        self.device = device

    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]:
        return [sealed(target, j, *target.client_update(j.down, j.private, j.data, j.ctx)) for j in jobs]

    def evaluate(self, target: Target, deployed: list[State], datas: list[LocalData]) -> list[float]:
        """One client after another, each model on its own test set."""
        return [accuracy(target.forward(params, data.x_test), data.y_test) for params, data in zip(deployed, datas)]


def sealed(target: Target, job: ClientJob, up: Payload, private: State) -> tuple[Payload, State]:
    """A job's result with its uplink as it leaves the client (`Target.seal`)."""
    return target.seal(up, job.down, job.ctx), private


def make_executor(name: str, device: str = "cpu") -> Executor:
    return EXECUTORS.get(name)(device=device)
