"""Expand an experiment into concrete jobs: federations to train and evaluations to run.

Every job (a *cell* of the sweep) is content-addressed: its folder name is a readable prefix and
the short hash of the canonical JSON of its fully resolved spec (`address`), so re-running an
experiment finds the work it already did, a cell whose spec is unchanged keeps its folder when
others are added, and editing a setting gives new folders instead of silently reusing outputs
trained with the old one. Values are addressed as their owner types them (`mu = 1` and
`mu = 1.0` are one FedProx, `shadows = 1.0` is `shadows = 1`), and a cell that two entries or two
grid values describe alike is planned once: two folders for one federation, or two workers
writing one folder, cannot happen. The cells are counted before they are made
(`Experiment.max_cells`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from fedattack.data.partition import parse_options
from fedattack.defaults import DEFAULT_DATASET
from fedattack.evaluation import EvaluationSpec
from fedattack.experiments.grid import DEFENCE_SETTINGS, POINT, require_cells
from fedattack.experiments.spec import Evaluation, Experiment
from fedattack.federation.spec import FederationSpec
from fedattack.registry import DATASETS, TARGETS, UserError
from fedattack.suggest import did_you_mean
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

    def record(self) -> dict[str, Any]:
        """What the sweep index says about this cell: its address and the spec it stands for."""
        spec = self.spec.to_json()
        return {"kind": "federation", "folder": self.ident, "address": address(spec), "spec": spec}


@dataclass(frozen=True)
class EvalJob:
    """One `evaluate` call: an [[evaluation]] entry applied to one federation with one seed."""

    federation: FederationJob
    evaluation: Evaluation
    seed: int

    @property
    def ident(self) -> str:
        """Addressed by the resolved evaluation alone (the folder sits inside its federation's)."""
        ev = self.evaluation
        return _safe(f"{'+'.join(ev.attacks)}-{'+'.join(ev.threat_models)}-s{self.seed}-"
                     f"{address(self.spec_json())}")

    @property
    def spec(self) -> EvaluationSpec:
        return self.evaluation.spec(self.seed)

    def spec_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self.spec)

    def record(self) -> dict[str, Any]:
        spec = self.spec_json()
        return {"kind": "evaluation", "folder": f"{self.federation.ident}/{self.ident}", "address": address(spec),
                "federation": self.federation.ident, "spec": spec}


@dataclass
class Plan:
    federations: list[FederationJob]
    evaluations: list[EvalJob]
    notes: list[str]


def plan(exp: Experiment) -> Plan:
    notes: list[str] = []
    feds: list[FederationJob] = []
    require_cells(sum(_federations_in(entry) for entry in exp.federations), exp.max_cells, "this experiment")
    for entry in exp.federations:
        for method in _list(entry, "method", "methods"):
            if method not in TARGETS:
                if not exp.skip_missing_methods:
                    raise UserError(f"method {method!r}{did_you_mean(method, TARGETS.names())} is not installed; "
                                    f"choose one of: {', '.join(TARGETS.names())}")
                notes.append(f"skipped method {method!r}: not installed in this fedattack")
                continue
            merged = {**entry, **entry.get("by_method", {}).get(method, {})}
            for partition in _list(merged, "partition", "partitions", default="shards"):
                for seed in _list(merged, "seed", "seeds", default=0):
                    spec = _cell_spec(merged, method, partition, seed)
                    feds.append(FederationJob(_ident(spec), spec))
    feds = list({f.ident: f for f in feds}.values())  # the same federation listed twice trains once
    require_cells(sum(len(ev.seeds) for ev in exp.evaluations for fed in feds if _selects(ev, fed)),
                  exp.max_cells, "this experiment's [[evaluation]] entries")
    evals = [job for ev in exp.evaluations for fed in feds for job in _eval_jobs(ev, fed)]
    evals = list({(job.federation.ident, job.ident): job for job in evals}.values())  # likewise
    return Plan(feds, evals, notes)


def _federations_in(entry: dict[str, Any]) -> int:
    """How many federations an entry stands for (methods x partitions x seeds), before making any."""
    count = len(_list(entry, "method", "methods"))
    for one, many, default in (("partition", "partitions", "shards"), ("seed", "seeds", 0)):
        count *= len(_list(entry, one, many, default=default))
    return count


def _cell_spec(entry: dict[str, Any], method: str, partition: Any, seed: Any) -> FederationSpec:
    """The spec of one cell; a refusal names the grid values the user wrote for it."""
    try:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise UserError(f"seed {seed!r} must be an integer")
        return federation_spec(entry, method, partition, seed)
    except UserError as exc:
        if entry.get(POINT):
            raise UserError(f"grid cell {entry[POINT]} ({method}): {exc}") from None
        raise


def defence_stack(entry: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The entry's `defences` (CLI strings or tables), with grid-set settings applied, normalised
    (every setting typed and its default explicit, so equal stacks have equal addresses)."""
    from fedattack.defences import normalise_defence, parse_defence

    items = entry.get("defences", [])
    if not isinstance(items, list) or not all(isinstance(d, (str, dict)) for d in items):
        raise UserError(f"defences = {items!r} must be a list such as [\"clip:max_norm=0.5\"]")
    stack = [parse_defence(d) if isinstance(d, str) else {"name": d.get("name"), "settings": d.get("settings", {})}
             for d in items]
    for name, settings in entry.get(DEFENCE_SETTINGS, {}).items():
        matching = [d for d in stack if d["name"] == name]
        if not matching:
            raise UserError(f"the grid sets a setting of defence {name!r}, which this cell does not have")
        for d in matching:
            d["settings"] = {**dict(d["settings"] or {}), **settings}
    return tuple(normalise_defence(d) for d in stack)


def federation_spec(entry: dict[str, Any], method: str, partition: str, seed: int) -> FederationSpec:
    """The entry's federation; what it leaves out comes from the dataset's defaults, as on the CLI."""
    hyper = typed(TARGETS.get(method).make_hyper(dict(entry.get("hyper", {}))), entry.get("hyper", {}))
    dataset = user_or_registered("dataset", str(entry.get("dataset", DEFAULT_DATASET)))
    DATASETS.get(dataset)  # unknown names and options are refused before the output folder is made
    options = typed(parse_options(partition, dict(entry.get("partition_options", {}))),
                    entry.get("partition_options", {}))
    base = FederationSpec()
    return FederationSpec.for_dataset(
        dataset, method=method, hyper=hyper,
        partition=partition,
        partition_options=options,
        num_clients=entry.get("clients", base.num_clients),
        model=user_or_registered("model", entry.get("model")),
        rounds=entry.get("rounds", base.rounds), fraction=_float(entry.get("fraction")),
        epochs=entry.get("epochs", Recipe.epochs), batch_size=entry.get("batch_size", Recipe.batch_size),
        lr=_float(entry.get("lr")), seed=seed, record=entry.get("record", base.record),
        eval_every=entry.get("eval_every", base.eval_every), executor=entry.get("executor", base.executor),
        normalize=entry.get("normalize", base.normalize), defences=defence_stack(entry))


def typed(built: Any, written: dict[str, Any]) -> dict[str, Any]:
    """The keys the user wrote, with the values their owner's dataclass made of them (mu = 1 is
    FedProx's float 1.0): equal settings get equal addresses however they were written."""
    return {k: getattr(built, k) for k in written if hasattr(built, k)}


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


def _selects(ev: Evaluation, fed: FederationJob) -> bool:
    return ev.selects(fed.spec.method, fed.spec.dataset, (fed.spec.partition, fed.partition_label))


def _eval_jobs(ev: Evaluation, fed: FederationJob) -> list[EvalJob]:
    return [EvalJob(fed, ev, seed) for seed in ev.seeds] if _selects(ev, fed) else []


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
    return _safe(f"{spec.method}-{spec.dataset}-{part}-s{spec.seed}-{address(spec.to_json())}")


def canonical(data: Any) -> str:
    """The one JSON text of a spec: keys sorted, fixed separators (what an address hashes)."""
    return json.dumps(data, sort_keys=True, default=str)


def address(data: Any) -> str:
    """A cell's short content address: 32 bits of SHA-256, ample for one experiment's cells."""
    return hashlib.sha256(canonical(data).encode()).hexdigest()[:8]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else ("star" if c == "*" else "_") for c in name)
