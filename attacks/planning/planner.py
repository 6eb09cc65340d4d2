"""Making an evaluation's plan (`plan.Plan`) from the run, the request and the budget.

The planner reads what each call's cost depends on before anything is attacked: the victim's
number of training images (from the partition: the user's tool may count them, the attack may
not), the rounds and uplinks its threat model sees, the reconstruction strategies that apply,
and the model's unit costs (`probe.measure`). The view, observation and strategies of every
(threat model, victim) are derived here once (`case.make_case`) and kept in the plan, which
execution reads. Named attacks (`--attack NAME`) that do not fit refuse the evaluation in one
line; `--attack all` and the default audit plan around them.
"""

from __future__ import annotations

from typing import Any

from fedattack.attacks.base import acting_mismatch
from fedattack.attacks.evaluation.data import Pools
from fedattack.attacks.evaluation.request import build_attacks, names
from fedattack.attacks.model_inversion.eval_classifier import training_cost
from fedattack.attacks.planning import default_audit
from fedattack.attacks.planning.case import Case, make_case
from fedattack.attacks.planning.cost import Budget, Cost, Decision, Workload
from fedattack.attacks.planning.plan import Call, Plan, decide, workload
from fedattack.attacks.planning.probe import measure
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, UserError
from fedattack.resources import default_budget, human_seconds, rss
from fedattack.target import Target


def budget_of(memory: int | None, seconds: float | None, default: bool) -> Budget:
    """The evaluation's budget: the user's, or a safe share of the available memory, and for the
    default audit a planning target of `default_audit.DEFAULT_SECONDS` when no --time is given."""
    time_source = "--time"
    if seconds is None and default:
        seconds, time_source = default_audit.DEFAULT_SECONDS, "the default audit's target; --time to change"
    if memory is None:
        return Budget(default_budget(), seconds, "half the memory available; --memory to change", time_source)
    return Budget(memory, seconds, "--memory", time_source)


def is_default(spec: EvaluationSpec) -> bool:
    return default_audit.DEFAULT in spec.attacks


def make_plan(fed: Any, target: Target, threats: list[ThreatModel], victims: list[int], spec: EvaluationSpec,
              pools: Pools, facts: RunFacts, budget: Budget) -> Plan:
    """Every call of the evaluation, costed and fitted to `budget`."""
    probe = measure(target, spec.executor, spec.seed)
    partition = fed.partition()
    works: dict[tuple[str, int], tuple[Workload, int]] = {}
    cases: dict[tuple[str, int], Case] = {}
    for victim in victims:
        samples = len(partition.clients[victim].train)
        for tm in threats:
            case = cases[(tm.name, victim)] = make_case(fed, target, tm, victim, facts, spec.reconstruction)
            works[(tm.name, victim)] = _work(target, case, spec, pools, samples, probe)
    plan = Plan(budget, rss(), default=is_default(spec), cases=cases)
    if plan.default:
        views = {tm.name: [c.view for c in cases.values() if c.tm is tm] for tm in threats}
        audit = default_audit.DefaultAudit(works, spec.settings, plan.room, budget.seconds, views)
        for pick in audit.choose(threats):
            plan.calls += [Call(attack, pick.tm, v, works[(pick.tm.name, v)][0], works[(pick.tm.name, v)][1], d)
                           for v, (attack, d) in sorted(pick.calls.items())]
        plan.left_out = audit.left_out
    else:
        attacks = build_attacks(names(spec.attacks, ATTACKS.names()), spec.settings)
        for tm in threats:
            for attack in attacks:
                for victim in victims:
                    work, strategies = works[(tm.name, victim)]
                    mismatch = acting_mismatch(attack, tm)  # not applicable, at no cost (`execute`)
                    decision = Decision(Cost(0.0, 0, mismatch)) if mismatch else decide(attack, work, strategies,
                                                                                       plan.room)
                    plan.calls.append(Call(attack, tm, victim, work, strategies, decision))
    charge_scorer(plan, len(pools.evaluation), probe)
    return plan


def charge_scorer(plan: Plan, evaluation: int, probe: Any) -> None:
    """The evaluation classifier is trained once, when the first call that needs it is scored:
    that call carries its time (its memory, a small model's, is within every call's margin)."""
    first = next((c for c in plan.calls if c.decision.runs and "evaluation" in c.attack.requires), None)
    if first is not None:
        extra = training_cost(probe, evaluation)
        first.decision.cost = first.decision.cost + Cost(extra.seconds, 0, extra.detail)


def _work(target: Target, case: Case, spec: EvaluationSpec, pools: Pools, samples: int,
          probe: Any) -> tuple[Workload, int]:
    members = min(samples, spec.max_queries)
    queries = members + max(members, min(spec.nonmembers, len(pools.nonmember)))
    knows = case.tm.knows
    aux = len(pools.aux) if knows.aux_size is None else min(knows.aux_size, len(pools.aux))
    return (workload(target, case.view, case.obs, samples, queries, aux, probe, len(pools.evaluation)),
            max(1, len(case.strategies)))


def refuse_named(plan: Plan, spec: EvaluationSpec) -> None:
    """Attacks the user named that cannot run within the budget refuse the evaluation, in one
    line, before anything runs (`all` and the default audit plan around them instead)."""
    if plan.default or "all" in spec.attacks:
        return
    refused = [c for c in plan.calls if c.decision.refused]
    if refused:
        raise UserError(f"refused before starting: {refused[0].decision.refused}")
    seconds = plan.budget.seconds
    if seconds is not None and plan.total_seconds > seconds:
        by_attack: dict[str, list[Call]] = {}
        for c in plan.running():
            by_attack.setdefault(c.attack.name, []).append(c)
        name, calls = max(by_attack.items(), key=lambda kv: sum(c.decision.cost.seconds for c in kv[1]))
        cheaper = calls[0].attack.cheaper(calls[0].work, plan.room, seconds / max(1, len(plan.running())))
        raise UserError(f"refused before starting: the plan needs ~{human_seconds(plan.total_seconds)} and --time "
                        f"allows {human_seconds(seconds)}; {name} takes ~"
                        f"{human_seconds(sum(c.decision.cost.seconds for c in calls))}"
                        + (f" ({cheaper})" if cheaper else "") + "; raise --time or name fewer attacks or victims")
