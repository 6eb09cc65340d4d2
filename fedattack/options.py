"""One way to turn what a user wrote into a plugin's settings dataclass.

Method hyperparameters, attack settings, partition options and defence settings all arrive as
`key=value` strings from the command line or as JSON/TOML values from a file, and all end up in
a frozen dataclass. Doing it in one place means every plugin refuses a typo, a wrong type or a
NaN the same way, with one line naming the setting and what the user wrote, and accepts the
same spellings (`min-samples` or `min_samples`; `true`/`yes`/`1`; `none`; `1,3` for tuples).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def named_settings(text: str, option: str, example: str) -> tuple[str, dict[str, str]]:
    """`NAME:key=value,key=value` (a `--defence` or `--active` value) -> (NAME, {key: value}); the
    values stay strings until `build_dataclass` types them."""
    name, _, rest = text.partition(":")
    settings: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{option} {text!r}: settings are key=value, e.g. {example}")
        settings[key.strip().replace("-", "_")] = value.strip()
    return name.strip(), settings


def build_dataclass(cls: type, overrides: Mapping[str, Any], what: str, noun: str = "setting") -> Any:
    """`cls(**overrides)` with every key checked and every value coerced to its field's type.

    `what` names the owner for messages ("method fedprox", "partition 'shards'"); keys may be
    kebab- or snake-case. Unknown keys are refused with the list of known ones.
    """
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    values: dict[str, Any] = {}
    for raw_key, value in overrides.items():
        key = str(raw_key).strip().replace("-", "_")
        if key not in known:
            raise UserError(f"{what} has no {noun} {raw_key!r}{did_you_mean(key, known)}; "
                            f"valid {noun}s: {', '.join(known) or 'none'}")
        values[key] = coerce(value, hints[key], f"{what} {noun} {key}")
    return cls(**values)


def one_of(value: Any, choices: Iterable[str], what: str) -> None:
    """Refuse a setting's value outside its fixed set in one line: the set, and the value
    probably meant (`what` names the setting, e.g. "dp-fedavg noise")."""
    allowed = tuple(choices)
    if value not in allowed:
        listed = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        raise UserError(f"{what}={value!r}{did_you_mean(value, allowed)}: use {listed}")


def check_device(device: str) -> None:
    """An attack's `device` setting: cpu, or cuda (cuda:N) where torch sees a GPU; anything
    else one line saying what this machine has (torch imported only for a device other than cpu)."""
    if device == "cpu":
        return
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return
    hint = "" if device.startswith("cuda") else did_you_mean(device, ("cpu", "cuda"))
    raise UserError(f"device {device!r}{hint}: use cpu, or cuda where a GPU is visible to torch "
                    f"(here: {'yes' if torch.cuda.is_available() else 'none'})")


def coerce(value: Any, hint: Any, what: str) -> Any:
    """`value` (a command-line string or a JSON value) as the annotated type `hint`.

    Supports bool, int, float (finite only), str, Optional/Union, Literal and tuples; a value of
    any other annotated class must already be an instance of it.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (types.UnionType, typing.Union):
        return _union(value, args, what)
    if origin is typing.Literal:
        return _literal(value, args, what)
    if origin is tuple:
        return _tuple(value, args, what)
    return _scalar(value, hint, what)


def _union(value: Any, args: tuple[Any, ...], what: str) -> Any:
    if type(None) in args and (value is None or str(value).strip().lower() in ("none", "")):
        return None
    errors = []
    for arg in (a for a in args if a is not type(None)):
        try:
            return coerce(value, arg, what)
        except UserError as exc:
            errors.append(exc)
    raise errors[0]


def _literal(value: Any, args: tuple[Any, ...], what: str) -> Any:
    for allowed in args:
        if value == allowed or (isinstance(value, str) and value.strip() == str(allowed)):
            return allowed
    raise UserError(f"{what} must be one of {', '.join(map(str, args))}, got {value!r}{did_you_mean(value, args)}")


def _tuple(value: Any, args: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise UserError(f"{what} must be a comma-separated list, got {value!r}")
    kept = [v for v in items if not (isinstance(v, str) and not v.strip())]
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        return tuple(coerce(v, args[0] if args else Any, what) for v in kept)
    if len(kept) != len(args):
        raise UserError(f"{what} must have {len(args)} comma-separated values, got {value!r}")
    return tuple(coerce(v, a, what) for v, a in zip(kept, args))


def _scalar(value: Any, hint: Any, what: str) -> Any:
    text = value.strip() if isinstance(value, str) else value
    try:
        if hint is bool:
            if isinstance(text, bool):
                return text
            if str(text).lower() in _TRUE | _FALSE:
                return str(text).lower() in _TRUE
        elif hint is int and not isinstance(text, (bool, float)):
            return int(text)
        elif hint is float and not isinstance(text, bool):
            number = float(text)
            if not math.isfinite(number):
                raise UserError(f"{what} must be a finite number, got {value!r}")
            return number
        elif hint is str and isinstance(text, str):
            return text
        elif isinstance(hint, type) and hint not in (bool, int, float, str) and isinstance(value, hint):
            return value
    except (TypeError, ValueError):
        pass
    raise UserError(f"{what} must be {getattr(hint, '__name__', hint)}, got {value!r}")
