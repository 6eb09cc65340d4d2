"""User models and datasets in the registries, from an explicit import path or an object in hand.

A federation trained elsewhere uses the user's own model and often their own data. Both must be
rebuildable later (the attacks train shadow models of that architecture on the dataset's test
split), so they go into the ordinary registries under a name the manifest records. A name of
the form `package.module:factory` is an import path: it is imported only when the user passes it
on the command line, in an experiment file or in code, never because a run directory names it
(opening a run never executes code); `missing_plugins` says what to pass instead.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fedattack.data.types import Dataset
from fedattack.registry import DATASETS, MODELS, Registry, UserError

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
USER_FACTORIES: dict[tuple[str, str], Callable[..., Any]] = {}  # (kind, name) -> the user's factory


def is_import_path(name: str) -> bool:
    return bool(IMPORT_PATH.match(name))


def import_path_or_refuse(path: str, option: str) -> str:
    if not is_import_path(path):
        raise UserError(f"{option} {path!r} is not an import path; write package.module:factory")
    return path


def import_object(path: str, what: str) -> Any:
    """`package.module:attribute` -> the object; one-line errors for every way it can fail."""
    if not is_import_path(path):
        raise UserError(f"{what} {path!r} is not an import path; write package.module:factory")
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r} for {what} {path} ({exc}); "
                        "is it installed or on PYTHONPATH?") from None
    except SyntaxError as exc:
        raise UserError(f"{what} {path}: {module_name} has a syntax error ({Path(exc.filename or '?').name}, "
                        f"line {exc.lineno}: {exc.msg}); fix the module") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module: one line, whatever it raised
        raise UserError(f"{what} {path}: importing {module_name} raised {_said(exc)}; fix the module") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{module_name} has no {attr!r} for {what} {path}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UserError(f"{what} {path} is not callable; point it at a factory function or class")
    return obj


def import_path_of(obj: Any) -> str | None:
    """The import path that finds `obj` again in another process, if there is one."""
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if not module or module == "__main__" or "<" in qual:
        return None
    return f"{module}:{qual}"


def _required_positional(func: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(1 for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _said(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _call_users(factory: Callable[..., Any], what: str, *args: Any) -> Any:
    """The user's factory called; whatever it raises is one line naming it (not "a fedattack bug")."""
    try:
        return factory(*args)
    except UserError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: one line, whatever it raised
        raise UserError(f"{what} raised {_said(exc)}; fix the factory") from None


def model_builder(factory: Callable[..., Any], name: str) -> Callable[..., nn.Module]:
    """A registry builder from a user factory: `factory()` or `factory(input_shape, num_classes)`.

    The model is tried once on a zero input: it must give one score per class, or the
    federation would fail deep inside training (or train a model that cannot be attacked)."""
    takes = _required_positional(factory)

    def build(input_shape: tuple[int, int, int], num_classes: int, layers: Any) -> nn.Module:
        args = () if takes == 0 else (input_shape, num_classes)
        model = _call_users(factory, f"model {name}", *args)
        if not isinstance(model, nn.Module):
            raise UserError(f"model {name} returned {type(model).__name__}, not a torch.nn.Module")
        check_outputs(model, name, input_shape, num_classes)
        return model

    return build


def check_outputs(model: nn.Module, name: str, input_shape: tuple[int, int, int], num_classes: int) -> None:
    """One forward pass on two zero images: (2, num_classes) scores, or a one-line refusal."""
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            out = model(torch.zeros((2, *input_shape)))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's model
        raise UserError(f"model {name} fails on a batch of {list(input_shape)} images: {_said(exc)}") from None
    finally:
        model.train(was_training)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserError(f"model {name} gives {got} for a batch of 2 images; the dataset has {num_classes} "
                        f"classes, so it must give [2, {num_classes}] (one score per class)")


def dataset_loader(factory: Callable[..., Any], name: str) -> Callable[[Path, bool], Dataset]:
    """A registry loader from a user factory: `factory()` or `factory(data_root)`."""
    takes = _required_positional(factory)

    def load(root: Path, download: bool) -> Dataset:
        return as_dataset(name, _call_users(factory, f"dataset {name}", *(() if takes == 0 else (root,))))

    return load


def register_model(model: str | Callable[..., Any], name: str | None = None) -> str:
    """Register a user model (an import path or a factory) and return its registry name."""
    return _register(MODELS, "model", model, name, model_builder)


def register_dataset(dataset: Any, name: str | None = None) -> str:
    """Register a user dataset (an import path, a factory, or the data itself); returns its name."""
    if not isinstance(dataset, str) and not callable(dataset):
        held = as_dataset(name or "dataset", dataset)
        if name is None:
            raise UserError("give dataset_name=... for data passed in hand (it is registered under it)")
        return _register(DATASETS, "dataset", lambda: held, name, dataset_loader)
    return _register(DATASETS, "dataset", dataset, name, dataset_loader)


def _register(registry: Registry, kind: str, item: str | Callable[..., Any], name: str | None,
              adapt: Callable[[Callable[..., Any], str], Any]) -> str:
    if isinstance(item, str):
        if item in registry:
            return item
        if not is_import_path(item):
            registry.get(item)  # the one-line "unknown ...; choose one of" error
        factory, name = import_object(item, kind), item
    else:
        factory, name = item, name or import_path_of(item)
        if name is None:
            raise UserError(f"this {kind} factory cannot be imported by name (defined in __main__ or "
                            f"inside a function); give {kind}_name=... to register it under")
    if name in registry and (kind, name) not in USER_FACTORIES:
        raise UserError(f"{kind} name {name!r} is taken by a built-in or plugin {kind}; choose another")
    if USER_FACTORIES.get((kind, name)) is not factory or name not in registry:
        # a factory defined again under its name (a notebook cell re-run) replaces the old one
        registry.restore({**registry.snapshot(), name: adapt(factory, name)})
        USER_FACTORIES[(kind, name)] = factory
    return name


def is_user(kind: str, name: str) -> bool:
    """Whether `name` was registered here from a user's factory (not a built-in or a plugin file)."""
    return (kind, name) in USER_FACTORIES


def as_dataset(name: str, data: Any) -> Dataset:
    """A fedattack `Dataset` from what a user factory returns.

    Accepted: a `Dataset`; `(x_train, y_train, x_test, y_test)` tensors or arrays; or
    `(train, test)` torch datasets yielding `(image, label)`. Images become float32 (N, C, H, W):
    (N, H, W) gains a channel, (N, D) features become (N, 1, 1, D).
    """
    if isinstance(data, Dataset):
        _finite_images(name, data.x_train, data.x_test)
        return data
    if isinstance(data, (tuple, list)) and len(data) == 4:
        xtr, ytr, xte, yte = (torch.as_tensor(np.asarray(a)) for a in data)
    elif isinstance(data, (tuple, list)) and len(data) == 2:
        (xtr, ytr), (xte, yte) = (_stack(name, part) for part in data)
    else:
        raise UserError(f"dataset {name} must give a fedattack Dataset, (x_train, y_train, x_test, "
                        "y_test) or (train, test) torch datasets")
    xtr, xte = _images(name, xtr), _images(name, xte)
    _finite_images(name, xtr, xte)
    ytr, yte = ytr.to(torch.int64).reshape(-1), yte.to(torch.int64).reshape(-1)
    if len(xtr) != len(ytr) or len(xte) != len(yte) or xtr.shape[1:] != xte.shape[1:] or not len(xte):
        raise UserError(f"dataset {name}: images and labels disagree in number or shape, or no test split")
    if min(int(ytr.min()), int(yte.min())) < 0:
        raise UserError(f"dataset {name} has negative labels; use class indices 0..K-1")
    k = int(max(ytr.max(), yte.max())) + 1
    return Dataset(name, xtr, ytr, xte, yte, tuple(str(c) for c in range(k)))


def _finite_images(name: str, train: torch.Tensor, test: torch.Tensor) -> None:
    """NaN or infinite pixels make every loss NaN: refused, naming the split and the count."""
    for split, x in (("train", train), ("test", test)):
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            raise UserError(f"dataset {name}'s {split} images hold NaN or infinite pixels "
                            f"({int((~torch.isfinite(x)).sum())} of {x.numel()}); clean or drop them")


def _stack(name: str, part: Any) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        pairs = [part[i] for i in range(len(part))]
        return (torch.stack([torch.as_tensor(np.asarray(x)) for x, _ in pairs]),
                torch.as_tensor([int(y) for _, y in pairs]))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UserError(f"dataset {name}: a split does not yield (image tensor, label) pairs ({exc})") from None


def _images(name: str, x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float32)
    if x.dim() == 2:
        return x[:, None, None, :]
    if x.dim() == 3:
        return x[:, None]
    if x.dim() != 4:
        raise UserError(f"dataset {name} has inputs of shape {list(x.shape)}; give (N, C, H, W) images")
    return x


def missing_plugins(manifest: dict[str, Any]) -> str | None:
    """What the user must pass so a recorded run's model and dataset can be rebuilt, or None."""
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        return None  # Federation refuses such a manifest with its own message
    for kind, registry, key in (("model", MODELS, "model"), ("dataset", DATASETS, "dataset")):
        name = spec.get(key)
        if isinstance(name, str) and name not in registry:
            how = (f"--{kind} {name}" if is_import_path(name)
                   else f"--plugin FILE (a file that registers {kind} {name!r})")
            return (f"this run was trained on the user {kind} {name!r}; pass {how} "
                    "(a run directory never imports code on its own)")
    return None
