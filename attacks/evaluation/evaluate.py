"""`evaluate_run(run, spec, out)`: attack a trained federation as an `EvaluationSpec` says and
write one result per victim, plus a summary.

For each victim and threat model: build the view (what the adversary sees), the knowledge its
threat model declares (`Knows`) and, separately, the ground truth; rebuild the victim's model
with each requested reconstruction strategy; run each attack; save its `AttackResult` as JSON
(images and tensors beside it). A threat model that sees nothing, or a method no strategy can
rebuild, gives a result with `applicable=False` and a note saying why, instead of an error.
`summary.json` holds mean and std over victims, `plan.json` every call's planned and measured
time and peak memory (`attacks.plan`).

Before anything runs, the evaluation is planned (`attacks.planning`): each call costed, fitted to
the memory budget (in chunks where the attack can work in chunks) and the time budget, printed,
and refused in one line where it cannot fit. While it runs, the process's address space is held
to the budget (`resources.guard`), so an estimate that was wrong ends in one line, not in the
kernel's out-of-memory killer; and the progress bar counts planned seconds (`fedattack.progress`).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from fedattack import resources
from fedattack.atomic import staging_dir
from fedattack.attacks.base import Adversary, ResultContext
from fedattack.attacks.evaluation import truth as truth_mod
from fedattack.attacks.evaluation.data import Pools, split_pools
from fedattack.attacks.evaluation.deferred import Deferred, deferrable, finish_deferred
from fedattack.attacks.evaluation.not_applicable import (
    diverged_note,
    not_applicable,
    not_applicable_into,
    nothing_seen,
    run_info,
)
from fedattack.attacks.evaluation.request import build_attacks, names, parse_victims
from fedattack.attacks.evaluation.selection import select_strongest
from fedattack.attacks.evaluation.summary import write_summary
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.evaluation.upper_bound import attack_strongest, held_calls
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS, Reconstructor, WireOnly, resolve
from fedattack.attacks.model_inversion.eval_classifier import eval_classifier
from fedattack.attacks.planning import default_audit
from fedattack.attacks.planning import planner as planning
from fedattack.attacks.planning.cost import Budget
from fedattack.attacks.planning.plan import Call
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.attacks.view import Knowledge, Observation, View
from fedattack.data import load_dataset
from fedattack.data.types import Dataset, DatasetMissing
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.claim import PidLock, refuse_dangerous
from fedattack.federation.executors import EXECUTORS
from fedattack.federation.rundir import Federation
from fedattack.interrupts import terminate_as_interrupt
from fedattack.progress import current_call, reporting
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError
from fedattack.resources import human_bytes
from fedattack.target import Target

GUARD_SLACK = 256 * 2**20  # the address-space guard sits this far above the budget: a net, not the budget


@dataclass(frozen=True)
class VictimCase:
    """One victim under one threat model: what the adversary has and what the scorer holds."""

    fed: Federation
    target: Target
    tm: ThreatModel
    victim: int
    knowledge: Knowledge
    truth: GroundTruth
    facts: RunFacts


def evaluate_run(run_dir: str | Path | Federation, spec: EvaluationSpec, out: str | Path, *,
                 data_root: str | None = None, progress: bool = True,
                 diverged: Literal["refuse", "not-applicable"] = "refuse", budget: Budget | None = None,
                 echo: Callable[[str], None] | None = None) -> list[Path]:
    """Attack `run_dir` as `spec` says and write results into `out`; returns the result files.

    Results are written into a hidden staging folder beside `out` and moved in only when every
    attack is done, so an interrupted or failed evaluation adds nothing to `out`; a pid lock
    refuses a second evaluation into the same folder while one runs. A run that diverged is
    refused (`diverged="refuse"`: one command, one line) or, for a sweep that must go on past
    it, given a not-applicable result per victim, threat model and attack that says why
    (`diverged="not-applicable"`). `budget` (default: `planning.budget_of`): the memory and time
    the evaluation may use; `echo` prints the plan (default: nowhere).
    """
    fed = run_dir if isinstance(run_dir, Federation) else Federation(run_dir)  # opening checks every file
    out = Path(out)
    refuse_dangerous(out)
    why = diverged_note(fed)
    if why and diverged == "refuse":
        raise UserError(f"{fed.path} {why}, train it again with a smaller --lr")
    with terminate_as_interrupt(), PidLock(out.parent / f".{out.name}.lock", f"evaluating into {out}"):
        clear_leftovers(out)  # under the lock, a staging folder can only be a killed evaluation's
        stage = staging_dir(out)
        try:
            written = (not_applicable_into(fed, spec, stage, why) if why
                       else _evaluate_into(fed, spec, stage, data_root, progress, budget, echo or _silent))
            return publish(stage, out, written)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def clear_leftovers(out: Path) -> None:
    """Remove the staging folders an evaluation killed with SIGKILL left beside `out`, and say so."""
    stale = sorted(out.parent.glob(f".{out.name}.partial-*")) if out.parent.is_dir() else []
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True) if folder.is_dir() else folder.unlink(missing_ok=True)
    if stale:
        print(f"note: removed {len(stale)} staging folder(s) an earlier evaluation into {out} left when it was "
              f"killed ({stale[0].name})", file=sys.stderr)


def _silent(line: str) -> None:
    """Where the plan goes when nobody asked to see it."""


def publish(stage: Path, out: Path, written: list[Path]) -> list[Path]:
    """Move the staged results (and their artifact folders, and the summary) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in sorted(stage.iterdir()):
        target = out / entry.name
        if target.is_dir() and entry.is_dir():
            shutil.rmtree(target)
        os.replace(entry, target)
    return [out / p.relative_to(stage) for p in written]


def _evaluate_into(fed: Federation, spec: EvaluationSpec, out: Path, data_root: str | None,
                   progress: bool, budget: Budget | None, echo: Callable[[str], None]) -> list[Path]:
    threats = [THREAT_MODELS.get(n)() for n in names(spec.threat_models, THREAT_MODELS.names())]
    if planning.is_default(spec):
        default_audit.check_options(spec.settings)
    else:
        build_attacks(names(spec.attacks, ATTACKS.names()), spec.settings)  # bad names and settings first
    chosen = parse_victims(spec.victims, fed, spec.seed)
    check_names(spec, threats)
    target = fed.target(data_root)
    try:
        dataset = load_dataset(fed.spec.dataset, data_root)
    except DatasetMissing as exc:  # evaluate never downloads: say where the data must be instead
        raise exc.with_hint("point --data-root / FEDATTACK_DATA at the folder the run was trained "
                            "from (evaluate never downloads)") from None
    fed.check_dataset(dataset)  # the manifest's input shape, classes and size are the data's
    partition = fed.partition()
    pools = split_pools(dataset, spec.aux_size, spec.eval_size, spec.seed)
    shared = shared_truth(fed, target, dataset, pools, spec)
    facts = RunFacts.of(fed)
    budget = budget or planning.budget_of(None, None, planning.is_default(spec))
    plan = planning.make_plan(fed, target, threats, chosen, spec, pools, facts, budget)
    for line in plan.lines():
        echo(line)
    planning.refuse_named(plan, spec)
    base = ResultContext(run=run_info(fed), pools=pools.sizes(), max_queries=spec.max_queries,
                         executor=spec.executor, reconstruction_request=spec.reconstruction,
                         threat_model={}, knowledge={})
    pending: list[Path | Deferred] = []
    with resources.guard(budget.memory + GUARD_SLACK), reporting(plan.total_seconds, disable=not progress):
        for victim in chosen:
            knowledge, truth = truth_mod.build(fed, target, dataset, partition, victim, pools, shared,
                                               spec.seed, spec.max_queries, spec.nonmembers)
            for tm in threats:
                calls = [c for c in plan.calls if c.tm is tm and c.victim == victim]
                if not calls:
                    continue
                known = knowledge.as_known_by(tm.knows)
                ctx = replace(base, threat_model=tm.describe(victim, facts), knowledge=known.describe())
                case = VictimCase(fed, target, tm, victim, known, truth, facts)
                pending += attack_victim(case, calls, spec, out, ctx, budget)
        written = finish_deferred(pending, spec.seed, plan)
    written += select_strongest(written, out)
    plan.save(out / "plan.json")
    if outcome := plan.outcome():  # measured against planned, beside the plan printed before
        echo(outcome)
    write_summary(out / "summary.json", written)
    return written


def check_names(spec: EvaluationSpec, threats: list[ThreatModel]) -> None:
    """Refuse a bad executor, strategy or auxiliary source before any work."""
    EXECUTORS.get(spec.executor)
    if spec.reconstruction not in ("auto", "all", "strongest"):
        for name in spec.reconstruction.split(","):
            RECONSTRUCTIONS.get(name.strip())
    for tm in threats:
        if tm.knows.aux_source != "test split":
            raise UserError(f"threat model {tm.name} wants auxiliary data from {tm.knows.aux_source!r}; "
                            "only the test split is available")


def shared_truth(fed: Federation, target: Target, dataset: Dataset, pools: Pools,
                 spec: EvaluationSpec) -> truth_mod.SharedTruth:
    """What every victim's truth shares; the evaluation classifier sees inputs as the run did."""
    key = (fed.spec.dataset, spec.aux_size, spec.eval_size, int(dataset.y_test.shape[0]))
    normalization = target.ctx.normalization
    return truth_mod.SharedTruth(pools.evaluation, truth_mod.train_class_means(dataset),
                                 lambda: eval_classifier(fed.spec.model, pools.evaluation,
                                                         dataset.num_classes, spec.seed, key,
                                                         normalization))


def attack_victim(case: VictimCase, calls: list[Call], spec: EvaluationSpec, out: Path,
                  ctx: ResultContext, budget: Budget) -> list[Path | Deferred]:
    """Every planned attack on one victim under one threat model, for each reconstruction strategy."""
    tm, victim, target = case.tm, case.victim, case.target
    runs = [c for c in calls if c.decision.runs]
    written: list[Path | Deferred] = [not_applicable(c.attack, tm, victim, spec.seed, out, ctx,
                                                     f"refused before it started: {c.decision.refused}")
                                      for c in calls if not c.decision.runs]
    view = tm.view(case.fed, victim, case.facts)
    if view.empty:
        note = nothing_seen(case.fed, tm, victim)
        return written + [not_applicable(c.attack, tm, victim, spec.seed, out, ctx, note) for c in runs]
    obs = view.observation()
    wire = [c for c in runs if c.attack.reads_wire]
    written += [read_wire(c, case, view, obs, spec, out, ctx, budget) for c in wire]
    runs = [c for c in runs if c not in wire]
    if not runs:
        return written
    strategies = resolve(spec.reconstruction, target, obs.parts(), tm.attacks_deployed)
    if not strategies:
        note = (f"no reconstruction strategy rebuilds a {target.name} model from what the {tm.name} "
                f"observes ({', '.join(sorted(obs.parts())) or 'nothing'} of round {obs.round})"
                + (f": {target.uplinks_hidden}" if target.uplinks_hidden else ""))
        return written + [not_applicable(c.attack, tm, victim, spec.seed, out, ctx, note) for c in runs]
    trained: dict[tuple[object, ...], list[Observation]] = {}  # shadows shared by every strategy
    for strategy in strategies:
        if strategy.needs_labels and not case.knowledge.labels_known:
            note = f"{strategy.name} fits the model on labelled auxiliary data; the {tm.name} knows no labels"
            sctx = replace(ctx, reconstruction=strategy.name)
            written += [not_applicable(c.attack, tm, victim, spec.seed, out, sctx, note) for c in runs]
            continue
        started = time.perf_counter()
        reconstructor = Reconstructor(strategy, target, case.knowledge, spec.seed, victim)
        model = reconstructor(obs, key=0)
        seen = {"round": obs.round, "parts": sorted(obs.parts())}
        sctx = replace(ctx, reconstruction=strategy.name, observation=seen,
                       reconstruction_seconds=time.perf_counter() - started)
        for call in runs:
            knowledge = case.knowledge.for_attack(call.attack.requires)
            adv = Adversary(view, knowledge, obs, model, reconstructor, spec.executor, trained, call.decision.chunk)
            path = out / f"{call.attack.name}-{tm.name}-{strategy.name}-victim{victim}.json"
            if deferrable(call.attack, spec.executor):  # run with every victim's after the loop
                written.append(Deferred(call.attack, held_calls(adv, case.truth, path, sctx), path, call))
                continue
            written.append(run_call(call, adv, case.truth, spec.seed, path, sctx, len(strategies), budget))
    return written


def read_wire(call: Call, case: VictimCase, view: View, obs: Observation, spec: EvaluationSpec, out: Path,
              ctx: ResultContext, budget: Budget) -> Path:
    """An attack that reads the wire itself (`reads_wire`, e.g. `readout`): no model to rebuild."""
    reconstructor = Reconstructor(WireOnly(), case.target, case.knowledge, spec.seed, case.victim)
    knowledge = case.knowledge.for_attack(call.attack.requires)
    adv = Adversary(view, knowledge, obs, reconstructor(obs), reconstructor, spec.executor)
    sctx = replace(ctx, reconstruction="wire", observation={"round": obs.round, "parts": sorted(obs.parts())})
    path = out / f"{call.attack.name}-{case.tm.name}-wire-victim{case.victim}.json"
    return run_call(call, adv, case.truth, spec.seed, path, sctx, 1, budget)


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
