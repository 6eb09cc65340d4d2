"""Executors run the local updates of the clients sampled in a round.

The sequential executor is the reference: one client after another, each through
`fedattack.training.sequential_train`. A faster executor registers itself in `EXECUTORS` and
must give the same result for the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fedattack.registry import Registry
from fedattack.rng import generator
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.training import sequential_train
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
    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]: ...


EXECUTORS: Registry = Registry("executor", "fedattack.federation.executor_plugins")


@EXECUTORS.register("sequential")
class SequentialExecutor:
    """One client at a time (the reference every faster executor is checked against)."""

    trainer = staticmethod(sequential_train)

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]:
        return [target.client_update(j.down, j.private, j.data, j.ctx) for j in jobs]


def make_executor(name: str, device: str = "cpu") -> Executor:
    return EXECUTORS.get(name)(device=device)


def training_jobs(target: Target, downs: list[Payload], datas: list[LocalData], seed: int,
                  rnd: int = 0, privates: list[State] | None = None,
                  ids: list[int] | None = None) -> list[ClientJob]:
    """Jobs that train one model per (starting payload, data) outside a federation.

    For models an attack trains itself, e.g. membership shadow models: `make_executor(name)
    .run(target, training_jobs(...))` returns one (uplink, private) per job, trained with the
    target's own local recipe. Batch order and noise come from (seed, rnd, id), so pass the
    attack's own seed: reusing the federation's seed and ids would replay a victim's draws.
    """
    ids = list(range(len(datas))) if ids is None else ids
    privates = privates or [target.init_private(k, d, generator(seed, "private", k))
                            for k, d in zip(ids, downs)]
    return [ClientJob(k, down, private, data, ClientContext(rnd, k, seed, sequential_train))
            for k, down, private, data in zip(ids, downs, privates, datas)]
