"""Expand an experiment into concrete jobs: federations to train and evaluations to run.

Every job has a stable folder name derived from its complete settings (a readable prefix and a
short hash), so re-running an experiment finds the work it already did, and editing a setting
gives new folders instead of silently reusing outputs trained with the old one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from fedattack.data.partition import parse_options
from fedattack.defaults import DEFAULT_DATASET
from fedattack.evaluation import EvaluationSpec
from fedattack.experiments.spec import Evaluation, Experiment
from fedattack.federation.spec import FederationSpec
from fedattack.registry import DATASETS, TARGETS, UserError
from fedattack.target import Recipe

T = TypeVar("T")


@dataclass(frozen=True)
class FederationJob:
    ident: str
    spec: FederationSpec

    @property
    def partition_label(self) -> str:
        dist = self.spec.partition_options.get("distribution")
        return f"{self.spec.partition}:{dist}" if dist else self.spec.partition


@dataclass(frozen=True)
class EvalJob:
    """One `evaluate` call: an [[evaluation]] entry applied to one federation with one seed."""

    federation: FederationJob
    evaluation: Evaluation
    seed: int

    @property
    def ident(self) -> str:
        ev = self.evaluation
        fields = {k: v for k, v in vars(ev).items() if k not in ("methods", "datasets", "partitions")}
        return _safe(f"{'+'.join(ev.attacks)}-{'+'.join(ev.threat_models)}-s{self.seed}-{_digest(fields)}")

    @property
    def spec(self) -> EvaluationSpec:
        return self.evaluation.spec(self.seed)


@dataclass
class Plan:
    federations: list[FederationJob]
    evaluations: list[EvalJob]
    notes: list[str]


def plan(exp: Experiment) -> Plan:
    notes: list[str] = []
    feds: list[FederationJob] = []
    for entry in exp.federations:
        for method in _list(entry, "method", "methods"):
            if method not in TARGETS:
                if not exp.skip_missing_methods:
                    raise UserError(f"method {method!r} is not installed; choose one of: {', '.join(TARGETS.names())}")
                notes.append(f"skipped method {method!r}: not installed in this fedattack")
                continue
            merged = {**entry, **entry.get("by_method", {}).get(method, {})}
            for partition in _list(merged, "partition", "partitions", default="shards"):
                for seed in _list(merged, "seed", "seeds", default=0):
                    spec = federation_spec(merged, method, partition, int(seed))
                    feds.append(FederationJob(_ident(spec), spec))
    feds = list({f.ident: f for f in feds}.values())  # the same federation listed twice trains once
    evals = [job for ev in exp.evaluations for fed in feds for job in _eval_jobs(ev, fed)]
    return Plan(feds, evals, notes)


def federation_spec(entry: dict[str, Any], method: str, partition: str, seed: int) -> FederationSpec:
    """The entry's federation; what it leaves out comes from the dataset's defaults, as on the CLI."""
    hyper = dict(entry.get("hyper", {}))
    TARGETS.get(method).make_hyper(hyper)  # refuse bad hyperparameters before anything trains
    dataset = user_or_registered("dataset", str(entry.get("dataset", DEFAULT_DATASET)))
    DATASETS.get(dataset)  # and unknown names and options, before the output folder is made
    parse_options(partition, dict(entry.get("partition_options", {})))
    base = FederationSpec()
    return FederationSpec.for_dataset(
        dataset, method=method, hyper=hyper,
        partition=partition,
        partition_options=dict(entry.get("partition_options", {})),
        num_clients=entry.get("clients", base.num_clients),
        model=user_or_registered("model", entry.get("model")),
        rounds=entry.get("rounds", base.rounds), fraction=_float(entry.get("fraction")),
        epochs=entry.get("epochs", Recipe.epochs), batch_size=entry.get("batch_size", Recipe.batch_size),
        lr=_float(entry.get("lr")), seed=seed, record=entry.get("record", base.record),
        eval_every=entry.get("eval_every", base.eval_every), executor=entry.get("executor", base.executor),
        normalize=entry.get("normalize", base.normalize))


def user_or_registered(kind: str, name: Any) -> Any:
    """An import path the experiment names (`package.module:factory`) is imported and registered;
    anything else is left for the spec to judge."""
    if not isinstance(name, str) or ":" not in name:
        return name
    from fedattack.interop.plugins import register_dataset, register_model
    return (register_model if kind == "model" else register_dataset)(name)


def _float(value: Any) -> Any:
    """A number written as an integer (lr = 1) is the float it means; anything else is left for
    the spec to judge, so a wrong type is refused there in one line, not converted silently."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _eval_jobs(ev: Evaluation, fed: FederationJob) -> list[EvalJob]:
    if not ev.selects(fed.spec.method, fed.spec.dataset, (fed.spec.partition, fed.partition_label)):
        return []
    return [EvalJob(fed, ev, seed) for seed in ev.seeds]


def _list(entry: dict[str, Any], one: str, many: str, default: Any = None) -> list[Any]:
    if one in entry and many in entry:
        raise UserError(f"give either {one} or {many} in a [[federation]] entry, not both")
    if many in entry:
        value = entry[many]
        return list(value) if isinstance(value, list) else [value]
    if one in entry:
        return [entry[one]]
    return [] if default is None else [default]


def _ident(spec: FederationSpec) -> str:
    dist = spec.partition_options.get("distribution")
    part = spec.partition + (f"-{dist}" if dist else "")
    return _safe(f"{spec.method}-{spec.dataset}-{part}-s{spec.seed}-{_digest(spec.to_json())}")


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else ("star" if c == "*" else "_") for c in name)
