"""Every victim's work on a sweep backend: `fedattack evaluate RUN --backend local|ray [--address ...]`.

The parent plans the whole evaluation once, as in one process (one probe, the default audit's
choice over every victim, every call's decision and chunk), prints the plan and what it comes
to on the workers the backend has, and then hands each victim to the backend as one task
(`experiments.backends`: the same tasks, retries of a task whose worker died and one-line
failures that sweeps have). A task rebuilds what the victim's calls need from the run
directory (the method, the data, the pools, the victim's cases: all keyed by the seed, none by
the process) and runs its planned calls exactly as the one-process loop does
(`evaluate._attack_victims`), into a hidden folder beside the results; the parent publishes
each finished victim into the results folder (`ResultsFolder`, so an interrupt keeps finished
victims and `--resume` skips them) and writes the selection, `plan.json` and `summary.json` at
the end. A task that dies (its worker killed, its node lost) leaves only its hidden folder,
which its retry clears.

What differs from the one-process evaluation is only where deferred calls stack: model
inversion inverts one victim's models together in its task, not every victim's at once, so
results equal `--backend sequential`'s (the same tasks, one after another in this process) bit
for bit, and the plain evaluation's bit for bit where a victim's inversion does not depend on
the others stacked beside it (tests/attacks/test_evaluate_on_backends.py holds the digits MLP's
result files to the same bytes on the local backend; elsewhere within float32, model
inversion's only). Result files record each call's measured seconds and memory, which are the
machine's, not the evaluation's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from fedattack.attacks.evaluation.results_folder import ResultsFolder, result_files
from fedattack.attacks.planning.cost import Budget, Decision
from fedattack.attacks.planning.plan import Call, Plan
from fedattack.evaluation import EvaluationSpec
from fedattack.resources import human_seconds


@dataclass(frozen=True)
class PlannedCall:
    """One call as the parent planned it, by names (a task imports the plugins before it
    builds anything)."""

    tm: str
    attack: str
    settings: dict[str, Any]
    decision: Decision


@dataclass(frozen=True)
class VictimJob:
    """Everything a task needs to run one victim's planned calls (picklable)."""

    run: str
    spec: EvaluationSpec
    victim: int
    calls: tuple[PlannedCall, ...]
    probe: Any  # the parent's `Probe`, without its model (the task rebuilds it)
    budget: Budget
    baseline: int
    out: str
    data_root: str | None


class TaskFolder:
    """Where a task's victim is published: a plain folder (the parent's `ResultsFolder` owns the
    results; this has only what `evaluate._attack_victims` calls)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def stage(self) -> Path:
        return Path(tempfile.mkdtemp(prefix=".stage-", dir=self.path))

    def publish(self, stage: Path, written: list[Path], *victims: int | None) -> list[Path]:
        for entry in sorted(stage.iterdir()):
            os.replace(entry, self.path / entry.name)
        shutil.rmtree(stage, ignore_errors=True)
        return [self.path / p.name for p in written]


def run_victim(job: VictimJob) -> None:
    """One victim's planned calls, into `job.out` (emptied first: a retried task starts clean)."""
    from fedattack.attacks.evaluation import evaluate as ev
    from fedattack.attacks.evaluation.data import split_pools
    from fedattack.attacks.planning.case import make_case
    from fedattack.attacks.planning.planner import _work
    from fedattack.attacks.threat_models.base import RunFacts
    from fedattack.federation.rundir import Federation
    from fedattack.registry import ATTACKS

    out = Path(job.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spec = job.spec
    fed = Federation(job.run)
    target = fed.target(job.data_root)
    dataset = ev._dataset(fed, job.data_root)
    pools = split_pools(dataset, spec.aux_size, spec.eval_size, spec.seed)
    threats = ev.threat_models(spec)  # as the parent planned them, the default audit's included
    facts, samples = RunFacts.of(fed), len(fed.partition().clients[job.victim].train)
    probe = dataclasses.replace(job.probe, target=target)
    plan = Plan(job.budget, job.baseline, default="default" in spec.attacks)
    for tm in threats:
        if not any(c.tm == tm.name for c in job.calls):
            continue
        case = plan.cases[(tm.name, job.victim)] = make_case(fed, target, tm, job.victim, facts, spec.reconstruction)
        work, strategies = _work(target, case, spec, pools, samples, probe)
        plan.calls += [Call(ATTACKS.get(c.attack)(ATTACKS.get(c.attack).Settings(**c.settings)), tm, job.victim,
                            work, strategies, c.decision) for c in job.calls if c.tm == tm.name]
    ev._attack_victims(fed, target, dataset, pools, spec, plan, threats, [job.victim], TaskFolder(out))


def jobs(fed: Any, spec: EvaluationSpec, plan: Plan, victims: list[int], folder: ResultsFolder,
         data_root: str | None) -> list[VictimJob]:
    """One job per victim, each with the calls the parent planned for it; paths absolute, as a
    worker (a Ray node) may start in another folder."""
    probe = plan.probe
    light = None if probe is None else dataclasses.replace(probe, target=None)
    root = None if data_root is None else str(Path(data_root).resolve())
    out = []
    for victim in victims:
        calls = tuple(PlannedCall(c.tm.name, c.attack.name, dataclasses.asdict(c.attack.settings), c.decision)
                      for c in plan.calls if c.victim == victim)
        out.append(VictimJob(str(Path(fed.path).resolve()), spec, victim, calls, light, plan.budget, plan.baseline,
                             str(folder.stage().resolve()), root))
    return out


def spread(backend: Any, jobs_: list[VictimJob], plan: Plan, folder: ResultsFolder,
           imports: tuple[tuple[str, str], ...], echo: Callable[[str], None]) -> None:
    """Run every victim's job on `backend`, publishing each victim as its task ends."""
    from fedattack.experiments.backends import Task, run_tasks

    by_stage = {job.out: job for job in jobs_}
    tasks = [Task(f"victim {job.victim}", Path(job.out), partial(run_victim, job), imports) for job in jobs_]

    def done(task: Any, outcome: Any) -> None:
        job = by_stage[str(task.final)]
        stage = Path(job.out)
        written = result_files(stage)
        record(plan, written)
        folder.publish(stage, written, job.victim)

    try:
        with backend:
            echo(on_workers(plan, workers(backend), backend.name))
            run_tasks(backend, tasks, done)
    finally:
        for job in jobs_:
            shutil.rmtree(job.out, ignore_errors=True)


def workers(backend: Any) -> int:
    """The tasks the backend runs at once: its workers, or a Ray cluster's CPUs."""
    slots = backend.slots
    return max(1, backend.workers if slots >= 1 << 20 else slots)


def on_workers(plan: Plan, n: int, name: str) -> str:
    """The plan's total spread over `n` workers: each victim a task, the longest first onto the
    least loaded worker (no victim splits, so the longest victim bounds it)."""
    per: dict[int, float] = {}
    for c in plan.running():
        per[c.victim] = per.get(c.victim, 0.0) + c.decision.cost.seconds
    loads = [0.0] * max(1, n)
    for seconds in sorted(per.values(), reverse=True):
        loads[loads.index(min(loads))] += seconds
    longest = max(per.values(), default=0.0)
    return (f"  on {n} {name} worker(s), one victim a task: ~{human_seconds(max(loads))} "
            f"(the longest victim ~{human_seconds(longest)}; ~{human_seconds(plan.total_seconds)} in one process)")


def record(plan: Plan, written: list[Path]) -> None:
    """What a task's calls measured (`extra.cost` of its results), into the parent's plan."""
    calls = {(c.attack.name, c.tm.name, c.victim): c for c in plan.calls}
    for path in written:
        r = json.loads(path.read_text())
        cost = (r.get("extra") or {}).get("cost") or {}
        call = calls.get((r.get("attack"), r.get("threat_model"), r.get("victim")))
        if call is None or "measured_seconds" not in cost:
            continue
        call.measured_seconds = (call.measured_seconds or 0.0) + cost["measured_seconds"]
        call.measured_cpu = (call.measured_cpu or 0.0) + cost.get("measured_cpu_seconds", 0.0)
        call.measured_peak = max(call.measured_peak or 0, cost.get("measured_peak_bytes") or 0)
