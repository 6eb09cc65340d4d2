"""Tiny digits federations whose server acts, trained once per session."""

from __future__ import annotations

from pathlib import Path

import torch

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.defences import parse_defence
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.active import parse_active
from fedattack.federation.train import train_federation
from fedattack.results import AttackResult
from fedattack.target import Recipe
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
