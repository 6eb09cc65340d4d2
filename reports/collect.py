"""Find result files and the federations they attacked, reading JSON only.

A report never re-runs anything: its inputs are `AttackResult` files and, for the utility
table, the `federation.json` / `metrics.json` of the run directories those results point at.
A folder given on the command line is searched for both, so a utility-only experiment (no
attack results) still gets its table. Files that are neither are skipped when found by a
search, and refused with one line when named explicitly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fedattack import provenance
from fedattack.registry import TARGETS, UserError
from fedattack.reports.audits import AuditFile, attach, is_audit, load_audit, read_audit
from fedattack.reports.identity import adversary_in, adversary_label, defence_label, defences_in
from fedattack.results import RESULT_SCHEMA, AttackResult

MANIFEST = "federation.json"
VARIANT_OPEN = " ["  # between a method and its variant in a label: "waffle-ibp [r_init_mean=1.0]"


@dataclass
class RunInfo:
    """What the report needs to know about one trained federation."""

    method: str
    dataset: str
    partition: str
    seed: int
    utility: dict[str, float] = field(default_factory=dict)
    path: Path | None = None
    classes: list[str] = field(default_factory=list)
    variant: str = ""  # hyperparameters that differ from the method's defaults, "k=v, ..."
    recipe: dict[str, Any] = field(default_factory=dict)  # local training: epochs, batch size, lr
    partition_options: dict[str, Any] = field(default_factory=dict)
    setting: str = ""  # recipe values that differ among this method's runs ("epochs=5"), also in the label
    software: provenance.Versions = None  # the manifest's `versions` (`fedattack.provenance`)
    defences: list[dict[str, Any]] = field(default_factory=list)  # the manifest's entries, innermost first
    defences_known: bool = True  # False: an old result whose run is out of reach; taken as undefended
    adversary: dict[str, Any] | None = None  # an active adversary that acted in training ({"name", "settings"})
    audits: list[AuditFile] = field(default_factory=list)  # its DP audits, found by `audits.attach`

    @property
    def undefended(self) -> str:
        """The method with its settings: what a defended run's undefended twin is called."""
        return f"{self.method}{VARIANT_OPEN}{self.variant}]" if self.variant else self.method

    @property
    def federation(self) -> str:
        """The method with its settings and defences: what was trained, whoever attacked it."""
        return f"{self.undefended} + {defence_label(self.defences)}" if self.defences else self.undefended

    @property
    def label(self) -> str:
        """The method as tables and figures name it: two settings of one method, a defended run
        and its undefended twin, an honest run and one where the server acted, are all rows of
        their own."""
        active = adversary_label(self.adversary)
        return f"{self.federation}, {active}" if active else self.federation

    @property
    def ident(self) -> tuple[Any, ...]:
        """Two results of one federation must count it once in the utility table."""
        if self.path is not None:
            return ("path", str(self.path.resolve()))
        return ("spec", self.label, self.dataset, self.partition, self.seed)


@dataclass
class LoadedResult:
    """One attack result, the file it came from, and the federation it attacked."""

    result: AttackResult
    path: Path
    run: RunInfo

    def artifact(self, name: str) -> Path | None:
        rel = self.result.artifacts.get(name)
        return None if rel is None else (self.path.parent / rel)


@dataclass
class Inputs:
    results: list[LoadedResult]
    runs: list[RunInfo]


def collect(paths: Iterable[str | Path]) -> Inputs:
    """Load every result and run reachable from `paths` (files or folders)."""
    results: list[LoadedResult] = []
    runs: dict[tuple[Any, ...], RunInfo] = {}
    found: list[AuditFile] = []
    named: list[AuditFile] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            _scan_folder(path, results, runs, found)
        elif path.is_file():
            if path.name == MANIFEST:
                info = read_run(path.parent)
                if info is not None:
                    _add_run(info, runs)
            elif is_audit(path):
                named.append(load_audit(path))
            else:
                results.append(load_result(path))
        else:
            raise UserError(f"{path} does not exist; pass result files or folders holding them")
    for r in results:
        _add_run(r.run, runs)
        r.run = runs[r.run.ident]  # one object per federation, so labels set below reach both
    _separate_settings(list(runs.values()))
    attach(list(runs.values()), found, named)
    if not results and not runs:
        names = ", ".join(str(p) for p in paths)
        raise UserError(f"no fedattack results or run directories found in {names}; run `fedattack evaluate` first")
    results = list({str(r.path.resolve()): r for r in results}.values())  # overlapping folders
    results.sort(key=lambda r: str(r.path))
    return Inputs(results, sorted(runs.values(), key=lambda r: (r.dataset, r.partition, r.label, r.seed)))


def _separate_settings(runs: list[RunInfo]) -> None:
    """Runs of one method on one partition that differ in a partition option (say the shuffle
    share) or in the training recipe (say the learning rate) get the differing values in their
    labels, so they are never averaged into one row; runs that differ only in seed still are."""
    for field_name in ("partition_options", "recipe"):
        groups: dict[tuple[str, str, str], list[RunInfo]] = {}
        for run in runs:
            groups.setdefault((run.dataset, run.partition, run.label), []).append(run)
        for members in groups.values():
            values = [getattr(run, field_name) for run in members]
            keys = sorted({k for v in values for k in v})
            differing = [k for k in keys if len({json.dumps(v.get(k), sort_keys=True) for v in values}) > 1]
            for run, v in zip(members, values):
                extra = ", ".join(f"{k}={v.get(k)}" for k in differing)
                if extra and field_name == "recipe":
                    run.variant = f"{run.variant}, {extra}" if run.variant else extra
                    run.setting = extra
                elif extra:
                    run.partition = f"{run.partition}{VARIANT_OPEN}{extra}]"


def _scan_folder(folder: Path, results: list[LoadedResult], runs: dict[tuple[Any, ...], RunInfo],
                 audits: list[AuditFile]) -> None:
    for file in sorted(folder.rglob("*.json")):
        rel_parts = file.relative_to(folder).parts
        if any(part.startswith(".") for part in rel_parts):
            continue  # a half-written run or result (atomic writes use hidden temporaries)
        if file.name == MANIFEST:
            info = read_run(file.parent, strict=False)
            if info is not None:
                _add_run(info, runs)
        elif _is_result(file):
            results.append(load_result(file))
        elif is_audit(file):
            audits.extend(a for a in [read_audit(file)] if a is not None)


def _is_result(file: Path) -> bool:
    """Cheap check before a full load: result files start with their schema tag."""
    try:
        with file.open("r", encoding="utf-8") as fh:
            head = fh.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return RESULT_SCHEMA in head


def _add_run(info: RunInfo, runs: dict[tuple[Any, ...], RunInfo]) -> None:
    runs.setdefault(info.ident, info)


def load_result(path: Path) -> LoadedResult:
    result = AttackResult.load(path)
    return LoadedResult(result, path, run_of(result, path))


def run_of(result: AttackResult, result_path: Path) -> RunInfo:
    """The attacked federation: its run directory when reachable, else what the result carries."""
    run = result.run or {}
    folder = _locate(run.get("path"), result_path)
    if folder is not None:
        info = read_run(folder, strict=False)
        if info is not None:
            info.adversary = info.adversary or adversary_in(run)
            return info
    utility = {k: float(v) for k, v in (run.get("utility") or {}).items() if _is_number(v)}
    method = str(run.get("method", "?"))
    defences, known = defences_in(run)
    return RunInfo(method=method, dataset=str(run.get("dataset", "?")),
                   partition=_partition_name(run.get("partition", "?")), seed=int(run.get("seed", 0)),
                   utility=utility, path=None, variant=variant_of(method, run.get("hyper")),
                   defences=defences, defences_known=known, adversary=adversary_in(run))


def _locate(raw: Any, result_path: Path) -> Path | None:
    if not raw:
        return None
    candidate = Path(str(raw))
    options = [candidate] if candidate.is_absolute() else [result_path.parent / candidate, candidate]
    for option in options:
        if (option / MANIFEST).is_file():
            return option
    return None


def read_run(folder: Path, strict: bool = True) -> RunInfo | None:
    """Read a run directory's manifest (JSON only); incomplete runs are not runs."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        spec = manifest["spec"]
        if manifest.get("complete") is not True:
            raise ValueError("incomplete")
        utility = {k: float(v) for k, v in manifest.get("utility", {}).items() if _is_number(v)}
        utility.update(_history_metrics(folder))
        defences, _ = defences_in(manifest, spec)
        return RunInfo(method=spec["method"], dataset=spec["dataset"],
                       partition=_partition_name(manifest.get("partition", spec["partition"]), spec),
                       seed=int(spec.get("seed", 0)), utility=utility, path=folder,
                       classes=[str(c) for c in (manifest.get("dataset") or {}).get("classes", [])],
                       variant=variant_of(spec["method"], spec.get("hyper"), manifest.get("source")),
                       recipe=dict(spec.get("recipe") or {}),
                       partition_options=_partition_options(manifest.get("partition"), spec),
                       software=provenance.recorded(manifest.get("versions")), defences=defences,
                       adversary=adversary_in(manifest, spec))
    except (OSError, ValueError, KeyError, TypeError):
        if strict:
            raise UserError(f"{folder} is not a complete fedattack run directory") from None
        return None


def without_variant(label: str) -> str:
    """A method or partition label without the differing settings appended to it, so that a
    paper's number, keyed by the bare name, stands beside every setting we ran."""
    return label.split(VARIANT_OPEN)[0]


def variant_of(method: str, hyper: Any, source: Any = None) -> str:
    """The hyperparameters a run set away from its method's defaults (as the method parses them),
    and the framework a recorded run was trained with, so that it is never pooled with
    fedattack's own training of the same method (fedattack.interop's `source.framework`)."""
    framework = source.get("framework") if isinstance(source, dict) else None
    recorded = f"recorded from {framework}" if isinstance(framework, str) and framework else ""
    if not isinstance(hyper, dict) or not hyper:
        return recorded
    try:
        cls = TARGETS.get(method)
        # a named recipe (waffle-ibp's recipe=personal) is one setting: the values it presets are
        # its own defaults, so the label says "recipe=personal" and only what was set beside it
        named = {"recipe": hyper["recipe"]} if "recipe" in hyper else {}
        chosen, default = asdict(cls.make_hyper(hyper)), asdict(cls.make_hyper(named))
        changed = {k: v for k, v in chosen.items() if v != default.get(k)}
        if named and asdict(cls.make_hyper({})).get("recipe") != default.get("recipe"):
            changed["recipe"] = default.get("recipe")
    except (UserError, TypeError, ValueError):  # a method or setting unknown here: show what was set
        changed = dict(hyper)
    return ", ".join([*(f"{k}={v}" for k, v in sorted(changed.items())), *filter(None, [recorded])])


def _history_metrics(folder: Path) -> dict[str, float]:
    """Metrics over the training history: agent 0's best local accuracy (WAFFLE's Table 1)."""
    try:
        history = json.loads((folder / "metrics.json").read_text()).get("rounds", [])
        best = max(float(h["accuracy"][0]) for h in history if _is_number(h["accuracy"][0]))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return {}
    return {"agent0_best": best * 100.0}


def _partition_name(partition: Any, spec: dict[str, Any] | None = None) -> str:
    """A readable partition label: its name plus the options that tell settings apart."""
    if isinstance(partition, dict):
        name = str(partition.get("name") or (spec or {}).get("partition", "?"))
        opts = partition.get("options") or (spec or {}).get("partition_options") or {}
    else:
        name, opts = str(partition), (spec or {}).get("partition_options") or {}
    dist = opts.get("distribution") if isinstance(opts, dict) else None
    return f"{name}:{dist}" if dist else name


def _partition_options(partition: Any, spec: dict[str, Any]) -> dict[str, Any]:
    opts = partition.get("options") if isinstance(partition, dict) else None
    opts = opts or spec.get("partition_options") or {}
    return dict(opts) if isinstance(opts, dict) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
