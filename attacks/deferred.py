"""Attacks whose optimisation stacks across victims run after the evaluation loop, all at once.

The loop of `evaluate` attacks one victim, threat model and reconstruction at a time. On the
papers' small models an optimisation over inputs (model inversion: thousands of steps of a
forward and a backward pass) is paid in per-step dispatch, not arithmetic, so one optimisation
over every victim's models together costs little more than one victim's
(`benchmarks/bench_waffle.py --inversion-victims`). With the batched executor (`--executor
batched`, as for shadow models) an attack that overrides `Attack.run_many` is therefore not run
in the loop: its calls are kept (`Deferred`, with the upper bound's held models as separate
calls) and run together when the loop ends, each attack once over every call, results saved in
the loop's order. Like batched shadow models, the numbers agree with the one-at-a-time
evaluation within floating-point tolerance, not bit for bit; with the sequential executor (the
default) nothing is deferred.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from fedattack.attacks.base import Attack, AttackCall
from fedattack.attacks.upper_bound import combine
from fedattack.results import AttackResult


@dataclass(frozen=True)
class Deferred:
    """An attack's result still to be computed: its calls (named by held model) and its file."""

    attack: Attack
    named: list[tuple[str, AttackCall]]
    path: Path


def deferrable(attack: Attack, executor: str) -> bool:
    """Whether the evaluation runs `attack` after its loop, over every victim at once."""
    return executor != "sequential" and type(attack).run_many is not Attack.run_many


def finish_deferred(written: list[Path | Deferred], seed: int, bar: tqdm) -> list[Path]:
    """Run every deferred attack over all its calls at once; the saved results, in place."""
    by_attack: dict[int, list[Deferred]] = {}
    for item in written:
        if isinstance(item, Deferred):
            by_attack.setdefault(id(item.attack), []).append(item)
    results: dict[int, AttackResult] = {}
    for group in by_attack.values():
        calls = [call for d in group for _, call in d.named]
        bar.set_postfix_str(f"{group[0].attack.name}: {len(calls)} models at once")
        out = iter(group[0].attack.call_many(calls, seed))
        for d in group:
            results[id(d)] = combine({name: next(out) for name, _ in d.named})
            bar.update()
    return [results[id(item)].save(item.path) if isinstance(item, Deferred) else item for item in written]
