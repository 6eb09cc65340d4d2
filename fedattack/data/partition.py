"""Building partitions by name: option parsing and validation in front of the registry.

Every partitioner in `fedattack.data.partitioners` registers a class with a frozen dataclass
`Options` and a `split(labels, num_clients, seed, dataset_name, options)`. This module turns what
a user typed (`key=value` strings) or what a saved spec holds (JSON values) into that dataclass,
checking every key and type, so a typo fails with one line instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from fedattack.data.types import Partition
from fedattack.registry import PARTITIONS, UserError

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def make_partition(
    name: str,
    labels: np.ndarray | torch.Tensor,
    num_clients: int | None,
    seed: int,
    dataset_name: str,
    **options: Any,
) -> Partition:
    """Partition the train-split `labels` with the registered partitioner `name`.

    `options` are keyword values of the partitioner's `Options` (strings are parsed as on the
    command line). `num_clients` None lets the partitioner pick its paper default.
    """
    partitioner = PARTITIONS.get(name)
    opts = parse_options(name, options)
    return partitioner.split(as_labels(labels), num_clients, int(seed), dataset_name, opts)


def partition_from_spec(
    spec: Mapping[str, Any], labels: np.ndarray | torch.Tensor, dataset_name: str
) -> Partition:
    """Rebuild a partition from its saved `Partition.spec` (same labels give the same result)."""
    try:
        name, seed, num_clients = spec["name"], spec["seed"], spec["num_clients"]
        options = dict(spec.get("options", {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"partition spec is malformed ({exc}); it needs name, seed, num_clients, options"
        ) from exc
    return make_partition(name, labels, num_clients, seed, dataset_name, **options)


def parse_options(name: str, values: Iterable[str] | Mapping[str, Any]) -> Any:
    """Build partitioner `name`'s Options from `key=value` strings or a mapping.

    Keys may use dashes or underscores. Unknown keys and values of the wrong type raise
    `UserError` naming the valid keys or the expected type.
    """
    options_cls = PARTITIONS.get(name).Options
    pairs = values.items() if isinstance(values, Mapping) else (_split_pair(v) for v in values)
    hints = typing.get_type_hints(options_cls)
    known = [f.name for f in dataclasses.fields(options_cls)]
    kwargs: dict[str, Any] = {}
    for raw_key, value in pairs:
        key = str(raw_key).replace("-", "_")
        if key not in known:
            raise UserError(
                f"partition {name!r} has no option {raw_key!r}; valid options: {', '.join(known)}"
            )
        kwargs[key] = coerce(value, hints[key], f"{name} option {key}")
    return options_cls(**kwargs)


def as_labels(labels: np.ndarray | torch.Tensor) -> np.ndarray:
    """Labels as a 1-D int64 numpy array, whatever array type the caller holds."""
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    array = np.asarray(labels)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise UserError("partition labels must be a 1-D array of integer class ids")
    return array.astype(np.int64, copy=False)


def _split_pair(text: str) -> tuple[str, str]:
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise UserError(f"partition option {text!r} is not of the form key=value")
    return key.strip(), value.strip()


def coerce(value: Any, hint: Any, what: str) -> Any:
    """Convert `value` (a string from the CLI, or a JSON value) to the annotated type `hint`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if type(None) in args and (value is None or str(value).strip().lower() in ("none", "")):
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, what)
            except UserError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise UserError(f"{what} must be a comma-separated list, got {value!r}")
        kept = [v for v in items if not (isinstance(v, str) and not v.strip())]
        return tuple(coerce(v, args[0], what) for v in kept)
    return _scalar(value, hint, what)


def _scalar(value: Any, hint: Any, what: str) -> Any:
    if isinstance(value, str):
        value = value.strip()
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in _TRUE | _FALSE:
                return str(value).lower() in _TRUE
        elif hint is int and not isinstance(value, (bool, float)):
            return int(value)
        elif hint is float and not isinstance(value, bool):
            return float(value)
        elif hint is str and isinstance(value, str):
            return value
    except (TypeError, ValueError):
        pass
    raise UserError(f"{what} must be {getattr(hint, '__name__', hint)}, got {value!r}")
