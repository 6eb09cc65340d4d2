"""The one result shape every attack returns, and its JSON file.

Reports read only these files, never attack internals (Foolbox's single return shape,
TextAttack's split of results from metrics from loggers), so a new attack shows up in every
report without touching `reports/`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedattack.atomic import write_json
from fedattack.jsonfile import read_json
from fedattack.registry import UserError

RESULT_SCHEMA = "fedattack.result/1"
LEAK_DIRECTIONS = ("higher", "lower", "none")  # "none": context, not a leak (a scorer's own accuracy)


@dataclass(frozen=True, kw_only=True)
class Metric:
    """How one metric of an attack reads: declared by the attack, carried by every result.

    `scale` turns the stored value into the displayed one (100 for rates stored as fractions and
    shown in %, the papers' unit). `leak` says which direction means the victim leaks more.
    `headline` metrics are the ones a summary line or a report table shows first; `primary`
    marks the one number that summarises the attack (the privacy axis of a figure). `bounds`
    is the range of stored values (error bars are clipped to it); None is unbounded. `chance`
    is what an adversary that only guesses would score, where that is defined. `client` says
    whether the metric measures what the adversary learns about this client's data (its members,
    its images, its class mix beyond the population's): a report's risk level counts only those; a
    class representative any model of the population would give (model inversion's attack accuracy)
    is `client=False`.
    """

    key: str
    label: str
    unit: str = ""
    scale: float = 1.0
    leak: str = "higher"
    headline: bool = True
    primary: bool = False
    bounds: tuple[float | None, float | None] = (None, None)
    digits: int = 2
    chance: float | None = None  # the value of an attack that only guesses (AUC 0.5), if one exists
    client: bool = True  # measures this client's data, so the risk level counts it (see above)

    def __post_init__(self) -> None:
        if self.leak not in LEAK_DIRECTIONS:
            raise ValueError(f"metric {self.key}: leak must be one of {LEAK_DIRECTIONS}, not {self.leak!r}")

    @property
    def title(self) -> str:
        """The label with its unit, as a table header shows it: "TPR @ 1% FPR (%)"."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "bounds": list(self.bounds)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Metric:
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}
        if "bounds" in fields:
            fields["bounds"] = tuple(fields["bounds"])
        return cls(**fields)


def metric_table(metrics: Iterable[Metric]) -> dict[str, dict[str, Any]]:
    """Metric declarations as a result file stores them: key -> fields, in declaration order."""
    return {m.key: m.to_json() for m in metrics}


@dataclass(kw_only=True)
class AttackResult:
    """What one attack did against one victim of one federation, and how well.

    `metrics` holds scalars (membership: accuracy, precision, recall, f1, auc, tpr_at_1fpr,
    tpr_at_01fpr; inversion: psnr, attack_accuracy, eval_classifier_accuracy); `curves` holds
    lists (membership: roc_fpr, roc_tpr); `baselines` maps a baseline's name to its metrics;
    `artifacts` maps a name to a file path relative to the result file (images, tensors).
    `metric_info` holds the attack's `Metric` declarations (key -> fields; see `declared`), so a
    report labels and scales numbers without importing the attack; results written before it
    existed have none, and reports fall back to the keys.
    `run` describes the attacked federation (path, method, dataset, partition, seed, utility) and
    is part of the result's identity: `run["defences"]` lists the defences it was trained with, as
    its manifest records them ({"name", "settings", "accounting"}; [] for none; absent in results
    written before it was recorded), and `run["active_adversary"]` names a server that acted during
    training ({"name", "settings"}; None or absent for an honest federation). Reports keep
    defended and undefended runs, honest and attacked federations, in rows of their own.
    `applicable` is False, with `note` saying why, when the threat model sees nothing to attack.
    """

    attack: str
    threat_model: str
    run: dict[str, Any]
    victim: int
    reconstruction: str = "none"
    settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    metric_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    applicable: bool = True
    upper_bound: bool = False
    note: str = ""

    def declared(self) -> dict[str, Metric]:
        """The attack's metric declarations, read back from the file."""
        return {k: Metric.from_json(v) for k, v in self.metric_info.items()}

    def to_json(self) -> dict[str, Any]:
        return {"schema": RESULT_SCHEMA, **dataclasses.asdict(self)}

    def save(self, path: str | Path) -> Path:
        """Write atomically, so a half-written result never reads as a result."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> AttackResult:
        """Read a result file, which may come from anyone: bounded JSON, every field's type checked."""
        path = Path(path)
        data = read_json(path, "pass result files from `fedattack evaluate`",
                         "re-run the attack that wrote it")
        if not isinstance(data, dict) or data.get("schema") != RESULT_SCHEMA:
            raise UserError(f"{path} is not a fedattack result ({RESULT_SCHEMA}); "
                            "pass result files from `fedattack evaluate`")
        data.pop("schema")
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}
        problem = _malformed(fields)
        if problem:
            raise UserError(f"{path} is not a result fedattack wrote intact ({problem}); re-run the attack")
        return cls(**fields)


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "attack": str, "threat_model": str, "run": dict, "victim": int, "reconstruction": str,
    "settings": dict, "seed": int, "seconds": (int, float), "metrics": dict, "curves": dict,
    "baselines": dict, "artifacts": dict, "metric_info": dict, "extra": dict, "applicable": bool,
    "upper_bound": bool, "note": str}


def _malformed(fields: dict[str, Any]) -> str | None:
    """What is wrong with a result's fields (None: nothing): missing, mistyped, non-numeric metrics,
    artifact paths that leave the result's folder."""
    for key in ("attack", "threat_model", "run", "victim"):
        if key not in fields:
            return f"no {key!r}"
    for key, value in fields.items():
        kind = _FIELD_TYPES[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"{key!r} is not {getattr(kind, '__name__', 'a number')}"
    if fields["victim"] < 0 or not fields["attack"] or not fields["threat_model"]:
        return "a negative victim or an empty attack or threat model name"
    curves = fields.get("curves", {}).values()
    if not all(isinstance(c, list) and all(v is None or _number(v) for v in c) for c in curves):
        return "a curve is not a list of numbers"
    numbers = [*fields.get("metrics", {}).values(),
               *(v for b in fields.get("baselines", {}).values() if isinstance(b, dict) for v in b.values())]
    if any(v is not None and not _number(v) for v in numbers):
        return "a metric is not a number"
    for rel in fields.get("artifacts", {}).values():
        if not isinstance(rel, str) or rel.startswith(("/", "\\")) or ".." in Path(rel).parts:
            return f"the artifact path {rel!r} leaves the result's folder"
    return None


def _number(v: object) -> bool:
    """A JSON number (NaN included: attacks write it for a metric that is undefined)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)
