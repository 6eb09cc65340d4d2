"""Running the planned calls of one victim under one threat model (`attack_case`).

Planning already derived what the adversary has for this (threat model, victim): its view, the
observation a model is rebuilt from and the reconstruction strategies that apply
(`planning.case.Case`); this module rebuilds the model with each strategy, runs each attack on
it (or, for an attack that reads the wire itself, on no model), measures each call and saves
its result. A threat model that sees nothing, or a method no strategy rebuilds, gives results
with `applicable=False` and a note saying why, instead of an error.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from fedattack import resources
from fedattack.attacks.base import Adversary, ResultContext, acting_mismatch
from fedattack.attacks.evaluation.deferred import Deferred, deferrable
from fedattack.attacks.evaluation.not_applicable import not_applicable, nothing_seen
from fedattack.attacks.evaluation.results_folder import ResultsFolder
from fedattack.attacks.evaluation.spread import TaskFolder
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.evaluation.upper_bound import attack_strongest, held_calls
from fedattack.attacks.hidden_parts.base import Reconstructor, WireOnly
from fedattack.attacks.planning.case import Case
from fedattack.attacks.planning.cost import Budget
from fedattack.attacks.planning.plan import Call
from fedattack.attacks.view import Knowledge, Observation
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.progress import current_call
from fedattack.registry import UserError
from fedattack.resources import human_bytes
from fedattack.target import Target


@dataclass(frozen=True)
class VictimCase:
    """One victim under one threat model: the plan's case, what the adversary knows, the truth."""

    fed: Federation
    target: Target
    case: Case
    knowledge: Knowledge
    truth: GroundTruth


class Where:
    """Where results go: the current victim's staging folder (`now`), and, for attacks run after
    the loop over every victim (`deferred`), a staging folder that lives until the evaluation
    ends (`later()`, made when first needed)."""

    def __init__(self, folder: ResultsFolder | TaskFolder) -> None:
        self.folder = folder
        self.now = folder.path
        self._later: Path | None = None

    def later(self) -> Path:
        if self._later is None:
            self._later = self.folder.stage()
        return self._later

    def hold(self, written: list[Path]) -> list[Path]:
        """Move what the current victim staged into `later()`, to be published with the
        deferred results; the paths they will have there."""
        later = self.later()
        if self.now != self.folder.path:
            for entry in sorted(self.now.iterdir()):
                os.replace(entry, later / entry.name)
            shutil.rmtree(self.now, ignore_errors=True)
        return [later / p.name for p in written]

    def clear(self) -> None:
        """Remove what is still staged (an interrupt or an error left it)."""
        for stage in (self.now, self._later):
            if stage is not None and stage != self.folder.path:
                shutil.rmtree(stage, ignore_errors=True)


def attack_case(vc: VictimCase, calls: list[Call], spec: EvaluationSpec, where: Where, ctx: ResultContext,
                budget: Budget) -> list[Path | Deferred]:
    """Every planned attack on one victim under one threat model, for each reconstruction strategy."""
    case, out = vc.case, where.now
    tm, victim = case.tm, case.victim
    runs = [c for c in calls if c.decision.runs]
    written: list[Path | Deferred] = [not_applicable(c.attack, tm, victim, spec.seed, out, ctx,
                                                     f"refused before it started: {c.decision.refused}")
                                      for c in calls if not c.decision.runs]
    written += [not_applicable(c.attack, tm, victim, spec.seed, out, ctx, why)
                for c in runs if (why := acting_mismatch(c.attack, tm))]
    runs = [c for c in runs if not acting_mismatch(c.attack, tm)]
    if case.view.empty:
        note = nothing_seen(vc.fed, tm, victim)
        return written + [not_applicable(c.attack, tm, victim, spec.seed, out, ctx, note) for c in runs]
    wire = [c for c in runs if c.attack.reads_wire]
    written += [read_wire(c, vc, spec, out, ctx, budget) for c in wire]
    runs = [c for c in runs if c not in wire]
    if not runs:
        return written
    if not case.strategies:
        return written + [not_applicable(c.attack, tm, victim, spec.seed, out, ctx, case.unrebuilt(vc.target))
                          for c in runs]
    trained: dict[tuple[object, ...], list[Observation]] = {}  # shadows shared by every strategy
    for strategy in case.strategies:
        if strategy.needs_labels and not vc.knowledge.labels_known:
            note = f"{strategy.name} fits the model on labelled auxiliary data; the {tm.name} knows no labels"
            sctx = replace(ctx, reconstruction=strategy.name)
            written += [not_applicable(c.attack, tm, victim, spec.seed, out, sctx, note) for c in runs]
            continue
        started = time.perf_counter()
        reconstructor = Reconstructor(strategy, vc.target, vc.knowledge, spec.seed, victim)
        model = reconstructor(case.obs, key=0)
        sctx = replace(ctx, reconstruction=strategy.name, observation=case.seen(),
                       reconstruction_seconds=time.perf_counter() - started)
        for call in runs:
            knowledge = vc.knowledge.for_attack(call.attack.requires)
            adv = Adversary(case.view, knowledge, case.obs, model, reconstructor, spec.executor, trained,
                            call.decision.chunk)
            name = f"{call.attack.name}-{tm.name}-{strategy.name}-victim{victim}.json"
            if deferrable(call.attack, spec.executor):  # run with every victim's after the loop
                path = where.later() / name
                written.append(Deferred(call.attack, held_calls(adv, vc.truth, path, sctx), path, call))
                continue
            written.append(run_call(call, adv, vc.truth, spec.seed, out / name, sctx, len(case.strategies), budget))
    return written


def read_wire(call: Call, vc: VictimCase, spec: EvaluationSpec, out: Path, ctx: ResultContext,
              budget: Budget) -> Path:
    """An attack that reads the wire itself (`reads_wire`, e.g. `readout`): no model to rebuild."""
    case = vc.case
    reconstructor = Reconstructor(WireOnly(), vc.target, vc.knowledge, spec.seed, case.victim)
    knowledge = vc.knowledge.for_attack(call.attack.requires)
    adv = Adversary(case.view, knowledge, case.obs, reconstructor(case.obs), reconstructor, spec.executor)
    sctx = replace(ctx, reconstruction="wire", observation=case.seen())
    path = out / f"{call.attack.name}-{case.tm.name}-wire-victim{case.victim}.json"
    return run_call(call, adv, vc.truth, spec.seed, path, sctx, 1, budget)


def run_call(call: Call, adv: Adversary, truth: GroundTruth, seed: int, path: Path, ctx: ResultContext,
             strategies: int, budget: Budget) -> Path:
    """One attack on one rebuilt model, measured (wall seconds, the process's peak memory) and
    with its plan beside the numbers; an allocation past the budget ends the evaluation in one line."""
    planned = call.decision.cost.seconds / max(1, strategies)
    label = f"victim {call.victim} {call.tm.name} {ctx.reconstruction} {call.attack.name}"
    resources.reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    with current_call(label, planned):
        try:
            result = attack_strongest(call.attack, adv, truth, seed, path, ctx)
        except Exception as exc:
            if resources.out_of_memory(exc):
                raise UserError(f"{call.attack.name} on victim {call.victim} ({call.tm.name}) went past the "
                                f"memory budget ({human_bytes(budget.memory)}; its plan said "
                                f"~{human_bytes(call.decision.cost.peak_bytes)} beyond the "
                                f"{human_bytes(resources.rss())} held): raise --memory") from None
            raise
    call.record(result, time.perf_counter() - started, time.process_time() - cpu, resources.peak(), budget)
    return result.save(path)
