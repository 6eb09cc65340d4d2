"""Attacks whose optimisation stacks across victims run after the evaluation loop, all at once.

The loop of `evaluate` attacks one victim, threat model and reconstruction at a time. On the
papers' small models an optimisation over inputs (model inversion: thousands of steps of a
forward and a backward pass) is paid in per-step dispatch, not arithmetic, so one optimisation
over every victim's models together costs little more than one victim's
(`benchmarks/bench_waffle.py --inversion-victims`). With the batched executor (`--executor
batched`, as for shadow models) an attack that declares `Attack.stacks_victims` (its `run_many`
stacks the work) is therefore not run
in the loop: its calls are kept (`Deferred`, with the upper bound's held models as separate
calls) and run together when the loop ends, each attack once over every call, results saved in
the loop's order. Like batched shadow models, the numbers agree with the one-at-a-time
evaluation within floating-point tolerance, not bit for bit; with the sequential executor (the
default) nothing is deferred.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedattack import resources
from fedattack.attacks.base import Attack, AttackCall
from fedattack.attacks.evaluation.upper_bound import combine
from fedattack.progress import current_call
from fedattack.results import AttackResult


@dataclass(frozen=True)
class Deferred:
    """An attack's result still to be computed: its calls (named by held model) and its file."""

    attack: Attack
    named: list[tuple[str, AttackCall]]
    path: Path
    call: Any = None  # its `plan.Call`, to record what it measured


def deferrable(attack: Attack, executor: str) -> bool:
    """Whether the evaluation runs `attack` after its loop, over every victim at once."""
    return executor != "sequential" and attack.stacks_victims


def finish_deferred(written: list[Path | Deferred], seed: int, plan: Any = None) -> list[Path]:
    """Run every deferred attack over all its calls at once; the saved results, in place. Each
    result's measured time is its share of its group's, its peak memory the group's."""
    by_attack: dict[int, list[Deferred]] = {}
    for item in written:
        if isinstance(item, Deferred):
            by_attack.setdefault(id(item.attack), []).append(item)
    results: dict[int, AttackResult] = {}
    for group in by_attack.values():
        calls = [call for d in group for _, call in d.named]
        planned = sum(d.call.decision.cost.seconds for d in group if d.call is not None)
        resources.reset_peak()
        started, cpu = time.perf_counter(), time.process_time()
        with current_call(f"{group[0].attack.name}: {len(calls)} models at once", planned):
            out = iter(group[0].attack.call_many(calls, seed))
        seconds, peak = (time.perf_counter() - started) / len(group), resources.peak()
        cpu_share = (time.process_time() - cpu) / len(group)
        for d in group:
            results[id(d)] = combine({name: next(out) for name, _ in d.named})
            if d.call is not None and plan is not None:
                d.call.record(results[id(d)], seconds, cpu_share, peak, plan.budget)
    return [results[id(item)].save(item.path) if isinstance(item, Deferred) else item for item in written]
