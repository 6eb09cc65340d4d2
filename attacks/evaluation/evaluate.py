"""`evaluate_run(run, spec, out)`: attack a trained federation as an `EvaluationSpec` says and
write one result per victim, plus a summary.

The method is rebuilt from the run once. Before anything runs, the evaluation is planned
(`attacks.planning`): for each victim and threat model the view (what the adversary sees), the
observation and the reconstruction strategies (`planning.case`), each call costed, fitted to the
memory budget (in chunks where the attack can work in chunks) and the time budget, printed, and
refused in one line where it cannot fit. Then, victim by victim, the knowledge its threat model
declares (`Knows`) and, separately, the ground truth are built, every planned call runs
(`execute.attack_case`), and the victim's results are published into the folder as it finishes
(`ResultsFolder`, which also writes `summary.json` and `plan.json` at the end). While it runs,
the process's address space is held to the budget (`resources.guard`), so an estimate that was
wrong ends in one line, not in the kernel's out-of-memory killer; and the progress bar counts
planned seconds (`fedattack.progress`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from fedattack import resources
from fedattack.attacks.base import ResultContext
from fedattack.attacks.evaluation import spread
from fedattack.attacks.evaluation import truth as truth_mod
from fedattack.attacks.evaluation.data import Pools, split_pools
from fedattack.attacks.evaluation.deferred import Deferred, finish_deferred
from fedattack.attacks.evaluation.execute import VictimCase, Where, attack_case
from fedattack.attacks.evaluation.not_applicable import diverged_note, not_applicable_into, run_info
from fedattack.attacks.evaluation.request import build_attacks, names, parse_victims, threat_model_names, victims_done
from fedattack.attacks.evaluation.results_folder import Existing, ResultsFolder
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS
from fedattack.attacks.model_inversion.eval_classifier import eval_classifier
from fedattack.attacks.planning import default_audit
from fedattack.attacks.planning import planner as planning
from fedattack.attacks.planning.cost import Budget
from fedattack.attacks.planning.plan import Plan
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.data import load_dataset
from fedattack.data.types import Dataset, DatasetMissing
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.executors import EXECUTORS
from fedattack.federation.rundir import Federation
from fedattack.interrupts import terminate_as_interrupt
from fedattack.progress import reporting
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError
from fedattack.target import Target

GUARD_SLACK = 256 * 2**20  # the address-space guard sits this far above the budget: a net, not the budget


def evaluate_run(run_dir: str | Path | Federation, spec: EvaluationSpec, out: str | Path, *,
                 data_root: str | None = None, progress: bool = True,
                 diverged: Literal["refuse", "not-applicable"] = "refuse", budget: Budget | None = None,
                 echo: Callable[[str], None] | None = None, existing: Existing = "refuse",
                 resume_hint: str = "", backend: Any = None, imports: tuple[tuple[str, str], ...] = ()) -> list[Path]:
    """Attack `run_dir` as `spec` says and write results into `out`; returns every result file
    in `out` once the evaluation is complete (`summary.json` covers them all).

    A folder that already holds results is refused unless `existing` is "resume" (victims whose
    results are all there are skipped, and what is there is kept as it is) or "replace" (old
    results go once new ones are in place). Each victim's results are published as it finishes;
    an interrupt keeps them, the folder marked incomplete (`results_folder.Interrupted` says
    so, with `resume_hint`, the command that finishes it); a pid lock refuses a second
    evaluation into the same folder while one runs. A run that diverged is refused
    (`diverged="refuse"`: one command, one line) or, for a sweep that must go on past it, given
    a not-applicable result per victim, threat model and attack that says why
    (`diverged="not-applicable"`). `budget` (default: `planning.budget_of`): the memory and time
    the evaluation may use; `echo` prints the plan (default: nowhere). `backend` (a sweep
    backend, `experiments.backends.make_backend`): every victim one task on it (`spread`),
    `imports` the plugins its workers load first; None: every victim here, in this process.
    """
    fed = run_dir if isinstance(run_dir, Federation) else Federation(run_dir)  # opening checks every file
    why = diverged_note(fed)
    if why and diverged == "refuse":
        raise UserError(f"{fed.path} {why}, train it again with a smaller --lr")
    with terminate_as_interrupt(), ResultsFolder(out, existing, resume_hint) as folder:
        if why:
            not_applicable_into(fed, spec, threat_models(spec), folder, why)
            return folder.finish(None)
        plan = _evaluate_into(fed, spec, folder, data_root, progress, budget, echo or _silent, backend, imports)
        return folder.finish(plan)


def _silent(line: str) -> None:
    """Where the plan goes when nobody asked to see it."""


def _evaluate_into(fed: Federation, spec: EvaluationSpec, folder: ResultsFolder, data_root: str | None,
                   progress: bool, budget: Budget | None, echo: Callable[[str], None], backend: Any = None,
                   imports: tuple[tuple[str, str], ...] = ()) -> Plan | None:
    threats = threat_models(spec)
    if planning.is_default(spec):
        default_audit.check_options(spec.settings)
    else:
        build_attacks(names(spec.attacks, ATTACKS.names()), spec.settings)  # bad names and settings first
    chosen = parse_victims(spec.victims, fed, spec.seed)
    check_names(spec, threats)
    done = victims_done(folder.kept(), chosen, spec, threats, echo)
    folder.begin(chosen, done)
    todo = [v for v in chosen if v not in done]
    if not todo:
        return None
    target = fed.target(data_root)  # the evaluation's one method: every view, shadow and score uses it
    dataset = _dataset(fed, data_root)
    pools = split_pools(dataset, spec.aux_size, spec.eval_size, spec.seed)
    budget = budget or planning.budget_of(None, None, planning.is_default(spec))
    plan = planning.make_plan(fed, target, threats, todo, spec, pools, RunFacts.of(fed), budget)
    for line in plan.lines():
        echo(line)
    planning.refuse_named(plan, spec)
    if backend is not None:  # no address-space guard here: Ray maps its object store into this process
        spread.spread(backend, spread.jobs(fed, spec, plan, todo, folder, data_root), plan, folder, imports, echo)
    else:
        _attack_here(fed, target, dataset, pools, spec, plan, threats, todo, folder, progress)
    if outcome := plan.outcome():  # measured against planned, beside the plan printed before
        echo(outcome)
    return plan


def _attack_here(fed: Federation, target: Target, dataset: Dataset, pools: Pools, spec: EvaluationSpec, plan: Plan,
                 threats: list[ThreatModel], todo: list[int], folder: ResultsFolder, progress: bool) -> None:
    budget = plan.budget
    with resources.guard(budget.memory + GUARD_SLACK), reporting(plan.total_seconds, disable=not progress):
        _attack_victims(fed, target, dataset, pools, spec, plan, threats, todo, folder)


def _attack_victims(fed: Federation, target: Target, dataset: Dataset, pools: Pools, spec: EvaluationSpec,
                    plan: Plan, threats: list[ThreatModel], victims: list[int],
                    folder: ResultsFolder | spread.TaskFolder) -> None:
    """Victim by victim, every planned call, each victim's results published as it finishes;
    then the deferred attacks over every victim at once (`deferred`): a victim with a deferred
    call finishes with them, its other results staged beside theirs until then (so a resume
    never takes it for done without them)."""
    partition, shared, facts = fed.partition(), shared_truth(fed, target, dataset, pools, spec), RunFacts.of(fed)
    base = ResultContext(run=run_info(fed), pools=pools.sizes(), max_queries=spec.max_queries,
                         executor=spec.executor, reconstruction_request=spec.reconstruction,
                         threat_model={}, knowledge={})
    where = Where(folder)
    pending: list[Deferred] = []
    held: list[Path] = []
    try:
        for victim in victims:
            knowledge, truth = truth_mod.build(fed, target, dataset, partition, victim, pools, shared,
                                               spec.seed, spec.max_queries, spec.nonmembers)
            where.now = folder.stage()
            written: list[Path | Deferred] = []
            for tm in threats:
                calls = [c for c in plan.calls if c.tm is tm and c.victim == victim]
                if not calls:
                    continue
                known = knowledge.as_known_by(tm.knows)
                ctx = replace(base, threat_model=tm.describe(victim, facts), knowledge=known.describe())
                case = VictimCase(fed, target, plan.cases[(tm.name, victim)], known, truth)
                written += attack_case(case, calls, spec, where, ctx, plan.budget)
            waiting = [w for w in written if isinstance(w, Deferred)]
            pending += waiting
            paths = [w for w in written if isinstance(w, Path)]
            if waiting:  # done only once its deferred calls are: its results wait beside theirs
                held += where.hold(paths)
            else:
                folder.publish(where.now, paths, victim)
        if pending:
            saved = [p for p in finish_deferred(list(pending), spec.seed, plan) if isinstance(p, Path)]
            folder.publish(where.later(), held + saved, *sorted({d.call.victim for d in pending}))
    finally:
        where.clear()


def _dataset(fed: Federation, data_root: str | None) -> Dataset:
    try:
        dataset = load_dataset(fed.spec.dataset, data_root)
    except DatasetMissing as exc:  # evaluate never downloads: say where the data must be instead
        raise exc.with_hint("point --data-root / FEDATTACK_DATA at the folder the run was trained "
                            "from (evaluate never downloads)") from None
    fed.check_dataset(dataset)  # the manifest's input shape, classes and size are the data's
    return dataset


def threat_models(spec: EvaluationSpec) -> list[ThreatModel]:
    """The threat models named, "default" read by `request.threat_model_names`."""
    return [THREAT_MODELS.get(n)() for n in threat_model_names(spec.threat_models, planning.is_default(spec))]


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
