"""Experiment files: which federations to train, how to attack them, which paper table they mirror.

An experiment is one TOML file (read with `tomllib`, so loading one never runs code). Keys are
kebab-case (`batch-size`; snake_case is accepted too); an unknown key is refused with one line
naming it, because a misspelt key that is silently ignored gives a plausible wrong experiment.

    name = "my-experiment"            # optional; default: the file name
    description = "one line"
    caveat = "what the numbers are not"   # optional; shown first in the report
    reproduces = ["waffle-ibp:table3"] # paper tables shown beside ours (`fedattack report --list-papers`)
    skip-missing-methods = false      # true: leave out methods this installation lacks, with a note

    [defaults]                        # any [[federation]] key, for every federation
    dataset = "digits"

    [[federation]]                    # one entry = methods x partitions x seeds federations
    methods = ["fedavg", "waffle-ibp"] # or: method = "fedavg"
    partitions = ["shards"]           # or: partition = "shards"
    seeds = [0, 1]                    # or: seed = 0
    dataset = "digits"    model = "digits-mlp"   clients = 20   rounds = 20   fraction = 0.1
    epochs = 5   batch-size = 10   lr = 0.04   record = "auto"   eval-every = 1
    executor = "batched"   partition-options = {...}   hyper = {...}   # [default: batched]
    defences = ["clip:max_norm=0.5"]  # as --defence on the CLI (or {name = "clip", settings = {...}})
    [federation.grid]                 # every combination of these values (`fedattack.experiments.grid`)
    lr = [0.05, 0.1]
    [federation.by-method.waffle-ibp]  # overrides of any key above for one method
    lr = 0.05

    [[evaluation]]                    # attacks on the federations it selects
    methods = ["fedavg"]              # optional filters: methods, datasets, partitions
    threat-models = ["eavesdropper", "oracle"]
    attacks = ["membership", "inversion"]  # or "all"; left out: the default audit (the strongest that fit)
    reconstructions = ["strongest"]   # the default; strategy names, or "auto" / "all"
    victims = [0, 1]                  # client ids, "all" or "random:N"
    aux-size = 200                    # the adversary's auxiliary samples (default: the attack's)
    eval-size = 300                   # samples for the evaluation classifier (inversion)
    max-queries = 1000                # most members judged per victim
    nonmembers = 1000                 # non-members judged per victim (at least as many as members)
    seeds = [0]
    executor = "batched"              # trains shadow and reference models [default: batched]
    [evaluation.settings]             # attack settings; each goes to every attack that has it
    shadows = 3
    [evaluation.grid]                 # as [federation.grid], e.g. "settings.shadows" = [2, 4]

An [[evaluation]] entry is an `EvaluationSpec` (`fedattack.evaluation`) per seed, plus filters
choosing the federations it attacks; every key means what the same option of `fedattack
evaluate` means (see its --help, and `fedattack list`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedattack.evaluation import EvaluationSpec
from fedattack.experiments.grid import MAX_CELLS, POINT, expand
from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

TOP_KEYS = {"name", "description", "caveat", "reproduces", "skip_missing_methods", "defaults", "federation",
            "evaluation"}
FEDERATION_KEYS = {"method", "methods", "partition", "partitions", "seed", "seeds", "dataset", "model",
                   "clients", "rounds", "fraction", "epochs", "batch_size", "lr", "record", "eval_every",
                   "executor", "partition_options", "hyper", "by_method", "normalize", "defences", "grid"}
EVALUATION_KEYS = {"methods", "datasets", "partitions", "threat_models", "attacks", "reconstructions",
                   "victims", "aux_size", "eval_size", "max_queries", "nonmembers", "seeds",
                   "executor", "settings", "grid"}
OPAQUE = {"partition_options", "hyper", "settings"}  # option tables passed on to their owner (keys snake_cased)
TABLES = {"partition_options": "{ classes-per-client = 2 }", "hyper": "{ mu = 0.1 }", "settings": "{ shadows = 3 }",
          "by_method": "{ fedprox = { lr = 0.05 } }", "grid": "{ lr = [0.05, 0.1] }",
          "defaults": "{ dataset = \"digits\" }"}  # keys whose value must be a table, with an example


@dataclass(frozen=True)
class Evaluation:
    threat_models: tuple[str, ...]
    attacks: tuple[str, ...]
    reconstructions: tuple[str, ...] = ("strongest",)
    victims: tuple[int | str, ...] = (0,)
    aux_size: int | None = None
    eval_size: int | None = None
    max_queries: int | None = None
    nonmembers: int | None = None
    seeds: tuple[int, ...] = (0,)
    settings: dict[str, Any] = field(default_factory=dict)
    executor: str | None = None               # trains shadow and reference models (None: the spec's default)
    methods: tuple[str, ...] | None = None
    datasets: tuple[str, ...] | None = None
    partitions: tuple[str, ...] | None = None

    def spec(self, seed: int) -> EvaluationSpec:
        """The evaluation this entry asks for with one of its seeds."""
        queries = EvaluationSpec.max_queries if self.max_queries is None else self.max_queries
        nonmembers = EvaluationSpec.nonmembers if self.nonmembers is None else self.nonmembers
        return EvaluationSpec(threat_models=self.threat_models, attacks=self.attacks, victims=self.victims,
                              reconstruction=",".join(self.reconstructions), aux_size=self.aux_size,
                              eval_size=self.eval_size, max_queries=queries, nonmembers=nonmembers, seed=seed,
                              executor=self.executor or EvaluationSpec.executor, settings=self.settings)

    def specs(self) -> tuple[EvaluationSpec, ...]:
        return tuple(self.spec(seed) for seed in self.seeds)

    def selects(self, method: str, dataset: str, partition_names: tuple[str, ...]) -> bool:
        """partition_names: the partitioner's name and its label with options (`label-distribution:A`)."""
        return ((self.methods is None or method in self.methods)
                and (self.datasets is None or dataset in self.datasets)
                and (self.partitions is None or any(p in self.partitions for p in partition_names)))


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    federations: tuple[dict[str, Any], ...]   # one flat dict of federation keys per entry
    evaluations: tuple[Evaluation, ...]
    reproduces: tuple[str, ...] = ()
    skip_missing_methods: bool = False
    source: Path | None = None
    caveat: str = ""
    max_cells: int = MAX_CELLS  # the most cells (federations, evaluations) this experiment may have


def load(path: str | Path, max_cells: int = MAX_CELLS) -> Experiment:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"experiment file {path} does not exist; see `fedattack experiment list`") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nested array or table
        raise UserError(f"{path} is nested too deeply to be an experiment file") from None
    return parse(data, default_name=path.stem, source=path, max_cells=max_cells)


def parse(data: dict[str, Any], default_name: str = "experiment", source: Path | None = None,
          max_cells: int = MAX_CELLS) -> Experiment:
    where = source.name if source else "experiment"
    top = normalise(data, TOP_KEYS, where)
    defaults = normalise(top.get("defaults", {}), FEDERATION_KEYS, f"{where} [defaults]")
    feds = _tables(top.get("federation", []), "federation", where)
    if not feds:
        raise UserError(f"{where} has no [[federation]] entry; add at least one with a method")
    entries = []
    for i, raw in enumerate(feds):
        entry = {**defaults, **normalise(raw, FEDERATION_KEYS, f"{where} [[federation]] #{i + 1}")}
        by_method = entry.get("by_method", {})
        entry["by_method"] = {m: normalise(o, FEDERATION_KEYS - {"method", "methods", "by_method", "grid"},
                                           f"{where} [federation.by-method.{m}]") for m, o in by_method.items()}
        cells = expand(entry, FEDERATION_KEYS, f"{where} [[federation]] #{i + 1}", max_cells)
        if not all(c.get("method") or c.get("methods") for c in cells):
            raise UserError(f"{where} [[federation]] #{i + 1} names no method; add method = \"fedavg\"")
        entries.extend(cells)
    evals = []
    for i, e in enumerate(_tables(top.get("evaluation", []), "evaluation", where)):
        label = f"{where} [[evaluation]] #{i + 1}"
        for cell in expand(normalise(e, EVALUATION_KEYS, label), EVALUATION_KEYS, label, max_cells):
            point = cell.pop(POINT, None)
            evals.append(_evaluation(cell, f"{where} (grid cell {point})" if point else where))
    return Experiment(name=str(top.get("name", default_name)), description=str(top.get("description", "")),
                      federations=tuple(entries), evaluations=tuple(evals),
                      reproduces=tuple(_strings(top.get("reproduces", []), "reproduces", where)),
                      skip_missing_methods=bool(top.get("skip_missing_methods", False)), source=source,
                      caveat=str(top.get("caveat", "")), max_cells=max_cells)


def normalise(table: Any, allowed: set[str], where: str) -> dict[str, Any]:
    """kebab-case -> snake_case keys; refuse keys the format does not have."""
    if not isinstance(table, dict):
        raise UserError(f"{where} must be a table of key = value pairs")
    out = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in allowed:
            known = ", ".join(sorted(k.replace("_", "-") for k in allowed))
            raise UserError(f"unknown key {key!r}{did_you_mean(key, allowed)} in {where}; known keys: {known}")
        if name in TABLES and not isinstance(value, dict):
            raise UserError(f"{key} = {_short(value)} in {where} must be a table, e.g. {key} = {TABLES[name]}")
        if name in OPAQUE:
            value = {k.replace("-", "_"): v for k, v in value.items()}
        out[name] = value
    return out


def _short(value: Any) -> str:
    """A value as the message quotes it: never the whole of a huge one."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _tables(value: Any, name: str, where: str) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise UserError(f"{where}: [[{name}]] must be written as array-of-tables entries")
    return value


def _strings(value: Any, key: str, where: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        raise UserError(f"{where}: {key} must be a string or a list of strings")
    return items


def _ints(value: Any, key: str, where: str) -> tuple[int, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise UserError(f"{where}: {key} must be an integer or a non-empty list of integers")
    return tuple(items)


def _evaluation(e: dict[str, Any], where: str) -> Evaluation:
    if not e.get("threat_models"):
        raise UserError(f"{where} [[evaluation]] needs threat-models = [...]")
    if "attacks" in e and not e["attacks"]:
        raise UserError(f"{where} [[evaluation]] attacks = [] names nothing; leave it out for the default audit")
    settings = e.get("settings", {})
    if not isinstance(settings, dict) or any(isinstance(v, dict) for v in settings.values()):
        raise UserError(f"{where}: [evaluation.settings] holds key = value attack settings, e.g. shadows = 3")

    def opt(key: str) -> tuple[str, ...] | None:
        return tuple(_strings(e[key], key, where)) if key in e else None

    sizes = {k: e.get(k) for k in ("aux_size", "eval_size", "max_queries", "nonmembers")}
    for key, value in sizes.items():
        least = 1 if key == "max_queries" else 0
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise UserError(f"{where}: {key.replace('_', '-')} must be an integer of at least {least}")
    victims = e.get("victims", [0])
    victims = victims if isinstance(victims, list) else [victims]
    if not victims or not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in victims):
        raise UserError(f"{where}: victims must be client ids, \"all\" or \"random:N\"")
    executor = e.get("executor")
    if executor is not None:
        from fedattack.federation.executors import EXECUTORS
        if not isinstance(executor, str):
            raise UserError(f"{where}: executor must be an executor's name, e.g. \"batched\"")
        EXECUTORS.get(executor)  # an unknown one is refused before anything trains
    ev = Evaluation(threat_models=tuple(_strings(e["threat_models"], "threat-models", where)),
                    attacks=tuple(_strings(e.get("attacks", ["default"]), "attacks", where)),
                    reconstructions=tuple(_strings(e.get("reconstructions", ["strongest"]), "reconstructions", where)),
                    victims=tuple(victims), seeds=_ints(e.get("seeds", [0]), "seeds", where),
                    settings=dict(settings), methods=opt("methods"), datasets=opt("datasets"),
                    partitions=opt("partitions"), executor=executor, **sizes)
    try:
        ev.specs()  # the spec checks its own values
    except UserError as exc:
        raise UserError(f"{where} [[evaluation]]: {exc}") from None
    return ev
