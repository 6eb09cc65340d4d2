"""The complete description of a federation: what `fedattack train` was asked to do."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fedattack.data.normalization import check_mode
from fedattack.defaults import DEFAULT_DATASET
from fedattack.defaults import for_dataset as dataset_defaults
from fedattack.registry import UserError
from fedattack.target import Recipe, require_int, require_number
from fedattack.wire import RecordingPolicy

_DEFAULT = dataset_defaults(DEFAULT_DATASET)


@dataclass(frozen=True, kw_only=True)
class FederationSpec:
    """Everything that, with the seed, determines a federation bit for bit."""

    method: str = "fedavg"
    hyper: dict[str, Any] = field(default_factory=dict)
    dataset: str = DEFAULT_DATASET
    partition: str = "shards"
    partition_options: dict[str, Any] = field(default_factory=dict)
    num_clients: int | None = None
    model: str = _DEFAULT.model
    rounds: int = 20
    fraction: float = _DEFAULT.fraction
    recipe: Recipe = field(default_factory=lambda: Recipe(lr=_DEFAULT.lr))
    seed: int = 0
    record: str = "auto"
    eval_every: int = 1
    executor: str = "batched"  # the fastest that matches the sequential reference (docs/architecture.md)
    defences: tuple[dict[str, Any], ...] = ()  # {"name", "settings"}: wrappers, innermost first
    normalize: str = "dataset"  # inputs by the training split's mean/std, or "none" (pixels as they are)
    active: dict[str, Any] | None = None  # {"name", "settings"}: a server that acts (federation.active)

    @classmethod
    def for_dataset(cls, dataset: str, *, model: str | None = None, fraction: float | None = None,
                    lr: float | None = None, epochs: int = Recipe.epochs, batch_size: int = Recipe.batch_size,
                    **fields: Any) -> FederationSpec:
        """A spec with the dataset's defaults (`fedattack.defaults`) where a value is None or absent.

        The CLI, the TOML experiments and Python callers all build through here, so the same
        dataset gives the same federation whichever way it was asked for.
        """
        d = dataset_defaults(dataset)
        recipe = Recipe(epochs=epochs, batch_size=batch_size, lr=d.lr if lr is None else lr)
        return cls(dataset=dataset, model=model or d.model, fraction=d.fraction if fraction is None else fraction,
                   recipe=recipe, **fields)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["recipe"] = dataclasses.asdict(self.recipe)
        out["defences"] = [dict(d) for d in self.defences]
        if not self.defences:  # an undefended spec keeps the identity it had before defences existed
            del out["defences"]
        if self.normalize == "none":  # a spec written before normalisation existed meant none
            del out["normalize"]
        if self.active is None:  # an honest server keeps the identity specs had before active ones
            del out["active"]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FederationSpec:
        data = dict(data)
        recipe = data.get("recipe", {})
        if not isinstance(recipe, dict):
            raise UserError("recipe must hold epochs, batch_size and lr")
        data["recipe"] = Recipe(**recipe)
        data["defences"] = defence_entries(data.get("defences", ()))
        data.setdefault("normalize", "none")
        data.setdefault("executor", "sequential")  # a spec without one was written when that was the default
        return cls(**data)

    def __post_init__(self) -> None:
        """Validate in the model, so the CLI, experiment files and the Python API refuse alike."""
        for name in ("method", "dataset", "partition", "model", "record", "executor"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise UserError(f"{name}={getattr(self, name)!r} must be a non-empty name")
        for name in ("hyper", "partition_options"):
            if not isinstance(getattr(self, name), dict):
                raise UserError(f"{name} must be a table of key = value settings")
        require_int("rounds", self.rounds, least=1)
        require_int("eval_every", self.eval_every, least=1)
        require_int("seed", self.seed, least=0)
        if self.seed >= 2**63:
            raise UserError(f"seed={self.seed} must be below 2^63")
        if self.num_clients is not None:
            require_int("clients", self.num_clients, least=1)
        require_number("fraction", self.fraction, positive=True, at_most=1.0)
        if not isinstance(self.recipe, Recipe):
            raise UserError("recipe must hold epochs, batch_size and lr")
        RecordingPolicy(self.record).validate()
        check_mode(self.normalize)
        if self.active is not None and not (isinstance(self.active, dict) and isinstance(self.active.get("name"), str)):
            raise UserError("active must be a table naming an active threat model, e.g. {name = \"imprint\"}")

    def clients_per_round(self, num_clients: int) -> int:
        return max(1, min(num_clients, int(round(self.fraction * num_clients))))


def defence_entries(value: Any) -> tuple[dict[str, Any], ...]:
    """The spec's defences as written: a list of {"name", "settings"} tables (a forged manifest's
    string became a tuple of its characters, and the audit ended in an AttributeError)."""
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("settings", {}), dict)
            for d in value):
        raise ValueError(f"defences must be a list of {{name, settings}} tables, got {str(value)[:80]!r}")
    return tuple(value)
