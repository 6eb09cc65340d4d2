"""Tiny digits federations whose server acts: written as runs (`train`, read by `readout`), or
run in memory for the matrix of every method, active server and defence (`acted`)."""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from fedattack.attacks.active.readout import held
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.data.types import Dataset
from fedattack.defences import parse_defence
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.active import ActiveThreatModel, Exchange, parse_active
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import active_adversary, build_target, train_federation
from fedattack.results import AttackResult
from fedattack.target import LocalData, Recipe, Target
from fedattack.wire import Message
from tests.conftest import tiny_spec


def train(folder: Path, active: str | None = None, defences: tuple[str, ...] = (), **overrides) -> Path:  # type: ignore[no-untyped-def]
    """A digits federation (10 clients) with an optional active server and defences, one thread."""
    base = dict(partition="iid", rounds=2, fraction=1.0, recipe=Recipe(epochs=2, batch_size=10, lr=0.1),
                active=None if active is None else parse_active(active),
                defences=tuple(parse_defence(d) for d in defences))
    base.update(overrides)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_federation(tiny_spec(**base), folder, progress=False)
    finally:
        torch.set_num_threads(before)


def readout(run: Path, out: Path, victims: tuple[int | str, ...], threat_model: str = "server") -> list[AttackResult]:
    """The `readout` attack on `victims` of `run` under one threat model."""
    spec = EvaluationSpec(threat_models=(threat_model,), attacks=("readout",), victims=victims, aux_size=200,
                          eval_size=100)
    return [AttackResult.load(p) for p in sorted(evaluate_run(run, spec, out, progress=False))]


@dataclass
class Acted:
    """A tiny federation run in memory (no run directory): 3 clients of digits (40 images to train
    on), all sampled every round, so every client comes back to the acting round and after it."""

    target: Target
    adversary: ActiveThreatModel
    messages: list[Message]
    datas: list[LocalData]
    untrained: float  # the clients' mean accuracy on the model before any round
    accuracy: float  # and after the last
    moved: list[bool]  # per honest round: whether the server's model moved
    aux: torch.Tensor

    def exchange(self, rnd: int) -> Exchange:
        """The acting round `rnd` as the server holds it (`readout.held`, what `readout` reads)."""
        return held(self.target, self.messages, rnd, self.adversary.acted[0]["victim"], self.aux)


@functools.cache
def digits() -> Dataset:
    return load_dataset("digits")


CLIENTS = 3


def built(method: str, active: str | None, defences: tuple[str, ...] = (), rounds: int = 3,
          acting: int = 2) -> tuple[FederationSpec, Target, ActiveThreatModel | None]:
    """The spec, method and server of `acted` (None: an honest one), built as `train` builds
    them: a refusal raises `UserError` here, before any round."""
    when = "" if active is None else (f"{active},rounds={acting}" if ":" in active else f"{active}:rounds={acting}")
    spec = tiny_spec(method=method, partition="iid", partition_options={"client_size": 50}, num_clients=CLIENTS,
                     fraction=1.0, rounds=rounds, recipe=Recipe(epochs=1, batch_size=10, lr=0.1),
                     active=parse_active(when) if when else None, defences=tuple(parse_defence(d) for d in defences))
    target = build_target(spec, digits(), CLIENTS)
    return spec, target, active_adversary(spec, target, digits(), CLIENTS)


def acted(method: str, active: str, defences: tuple[str, ...] = (), rounds: int = 3, acting: int = 2) -> Acted:
    """`method` behind `defences` with the `active` server acting in round `acting` of `rounds`."""
    spec, target, adversary = built(method, active, defences, rounds, acting)
    assert adversary is not None
    data = digits()
    partition = make_partition(spec.partition, data, spec.num_clients, spec.seed, **spec.partition_options)
    messages: list[Message] = []
    datas = [client_data(data, partition, k) for k in range(CLIENTS)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loop = RoundLoop(spec, target, datas, make_executor(spec.executor), messages.append, adversary)
        state = loop.start()
        untrained = statistics.fmean(loop.evaluate(state))
        moved = []
        for rnd in range(1, rounds + 1):
            weights = {n: state.server[n].clone() for n in target.param_names if n in state.server}
            loop.run_round(state, rnd)
            if rnd != acting:
                moved.append(any(not torch.equal(t, state.server[n]) for n, t in weights.items()))
        accuracy = statistics.fmean(loop.evaluate(state))
    finally:
        torch.set_num_threads(before)
    return Acted(target, adversary, messages, datas, untrained, accuracy, moved, data.x_test)
