"""What the registries hold, read from the plugins' source without importing them.

Importing a plugin package imports torch (seconds), and `fedattack --help`, `fedattack list`
and a mistyped `--method` should answer at once. This module finds a registry's declaration and
the source files of its package without importing them; `fedattack.source_scan` reads the
registrations from those files.

Whenever the scan cannot tell (a computed name, a default that is not a literal, entry-point
plugins installed), `entries` imports the registry instead, so the answer is never a guess.
`tests/core/test_cli_fast.py` checks that the scan and the import agree on every built-in.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fedattack.source_scan import (
    SETTINGS_ATTRS,
    CannotTell,
    Classes,
    Entry,
    first_line,
    parse,
    registered,
    registries_declared,
)

__all__ = ["CannotTell", "Entry", "RegistryRef", "entries", "imported", "names", "scanned"]


@dataclass(frozen=True)
class RegistryRef:
    """Where a registry is declared: `variable = Registry("kind", "package")` in `module`."""

    module: str
    variable: str


def entries(ref: RegistryRef) -> list[Entry]:
    """The registry's items, from the source when it can tell, else by importing."""
    try:
        return scanned(ref)
    except CannotTell:
        return imported(ref)


def names(ref: RegistryRef) -> list[str]:
    return [e.name for e in entries(ref)]


def imported(ref: RegistryRef) -> list[Entry]:
    registry = getattr(importlib.import_module(ref.module), ref.variable)
    return [Entry(name, first_line(getattr(item, "__doc__", None)), settings_of(item))
            for name, item in registry.items()]


def settings_of(item: object) -> tuple[tuple[str, Any], ...]:
    import dataclasses

    for attr in SETTINGS_ATTRS:
        cls = getattr(item, attr, None)
        if cls is not None and dataclasses.is_dataclass(cls):
            return tuple((f.name, f.default) for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING)
    return ()


@cache
def scanned(ref: RegistryRef) -> list[Entry]:
    declared = registries_declared(parse(module_file(ref.module)))
    if ref.variable not in declared:
        raise CannotTell(f"{ref.module}.{ref.variable} is not a literal Registry(kind, package)")
    kind, package = declared[ref.variable]
    if importlib.metadata.entry_points(group=f"fedattack.{kind}s"):
        raise CannotTell(f"{kind} plugins are installed through entry points")
    others = {p for v, (_, p) in declared.items() if v != ref.variable}
    home_file, in_package = module_file(ref.module), package_files(package, others)
    files = [(f, parse(f)) for f in dict.fromkeys([home_file, *in_package])]
    classes = Classes(files, locate=_source_of)
    found: dict[str, Entry] = {}
    for file, tree in files:
        for entry in registered(tree, ref.variable, classes, file in in_package):
            if entry.name in found:
                raise CannotTell(f"{kind} {entry.name!r} is defined twice")
            found[entry.name] = entry
    return [found[n] for n in sorted(found)]


def _source_of(module: str) -> Path | None:
    """A module's source file, or None where it has none (for `Classes` to read imported bases)."""
    try:
        return module_file(module)
    except (CannotTell, ImportError, ValueError):
        return None


def find(module: str) -> importlib.machinery.ModuleSpec:
    """A module's spec without running its parents' `__init__` (`fedattack.data`'s imports torch).

    Packages that setuptools maps from elsewhere (`fedattack.targets`) are found by the normal
    import machinery, which imports only their (empty) parent packages.
    """
    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])
    for i in range(1, len(parts)):
        name = ".".join(parts[: i + 1])
        inner = spec.submodule_search_locations if spec is not None else None
        spec = (importlib.machinery.PathFinder.find_spec(name, list(inner)) if inner else None) \
            or importlib.util.find_spec(name)
    if spec is None:
        raise CannotTell(f"cannot find {module}")
    return spec


def module_file(module: str) -> Path:
    origin = find(module).origin
    if origin is None:
        raise CannotTell(f"{module} has no source file")
    return Path(origin)


def package_files(package: str, others: set[str]) -> list[Path]:
    """The package's modules, leaving out subpackages that hold a registry of their own."""
    locations = find(package).submodule_search_locations
    if not locations:
        raise CannotTell(f"{package} is not a package")
    files: list[Path] = []
    for root in locations:
        files += _own_files(Path(root), package, others)
    return sorted(files)


def _own_files(folder: Path, package: str, others: set[str]) -> list[Path]:
    files = sorted(folder.glob("*.py"))
    for sub in sorted(p.parent for p in folder.glob("*/__init__.py")):
        inner = _own_files(sub, f"{package}.{sub.name}", others)
        if f"{package}.{sub.name}" not in others and not any(registries_declared(parse(f)) for f in inner):
            files += inner
    return files
