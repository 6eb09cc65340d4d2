"""Name -> class registries shared by targets, attacks, threat models, datasets and partitions.

Everything a user can name on the command line lives in one of these registries, so the CLI
choices, `fedattack list`, reports and the conformance tests all read the same source and a new
method is one new file. Third-party plugins come in through entry points of the same group name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from fedattack.suggest import did_you_mean

T = TypeVar("T")


class UserError(Exception):
    """A mistake in what the user asked for; the CLI prints it as one line and exits non-zero."""


ALL_REGISTRIES: list[Registry[Any]] = []  # every registry, so a test can undo a plugin's entries


class Registry(Generic[T]):
    """A named collection that plugins add themselves to.

    `discover` imports every module of the package that holds the built-ins (each registers
    itself on import) and then every entry point of `fedattack.<kind>`, so nothing keeps a list.
    """

    def __init__(self, kind: str, package: str | None = None) -> None:
        self.kind = kind
        self.package = package
        self._items: dict[str, T] = {}
        self._discovered = False
        ALL_REGISTRIES.append(self)

    def register(self, name: str) -> Callable[[T], T]:
        def add(item: T) -> T:
            self.add(name, item)
            return item

        return add

    def add(self, name: str, item: T) -> None:
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item

    def discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        if self.package:
            _import_all(self.package)
        for ep in importlib.metadata.entry_points(group=f"fedattack.{self.kind}s"):
            ep.load()

    def get(self, name: str) -> T:
        self.discover()
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise UserError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._items)}; choose one of: {known}")
        return self._items[name]

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def registered(self) -> list[str]:
        """The names registered so far, without importing the built-ins (e.g. a --plugin file's)."""
        return sorted(self._items)

    def loaded(self) -> list[tuple[str, T]]:
        """The items registered so far, without importing the built-ins (what `registered` names)."""
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._items[n]) for n in self.names()]

    def snapshot(self) -> dict[str, T]:
        self.discover()
        return dict(self._items)

    def restore(self, items: dict[str, T]) -> None:
        self._items = dict(items)


def _import_all(package: str) -> None:
    """Import a package and all its submodules (recursively), so each registers itself."""
    pkg = importlib.import_module(package)
    for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
        importlib.import_module(info.name)


_LOADED_PLUGINS: set[Any] = set()


def _plugin_error(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):  # a script's `sys.exit()` ended the command with exit 0 and no word
        return f"it called sys.exit({exc.code!r}); a plugin file only defines and registers"
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at line {exc.lineno}: {exc.msg}"
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}"


def load_plugin_file(path: str) -> None:
    """Import a user's plugin file by path (e.g. a threat model), so it can register itself."""
    import importlib.util
    import sys
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise UserError(f"plugin file {path} does not exist; pass the path of a .py file")
    if file.resolve() in _LOADED_PLUGINS:  # a second command in one process (a notebook, a test)
        return
    _LOADED_PLUGINS.add(file.resolve())
    spec = importlib.util.spec_from_file_location(f"fedattack_plugin_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import plugin file {path}; it must be a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a user's file: one line, whatever it raised
        del sys.modules[spec.name]
        _LOADED_PLUGINS.discard(file.resolve())
        raise UserError(f"plugin file {path} failed to load: {_plugin_error(exc)}; fix the file") from None


DATASETS: Registry = Registry("dataset", "fedattack.data.sources")
PARTITIONS: Registry = Registry("partition", "fedattack.data.partitioners")
MODELS: Registry = Registry("model", "fedattack.models.zoo")
TARGETS: Registry = Registry("target", "fedattack.targets")
THREAT_MODELS: Registry = Registry("threat_model", "fedattack.attacks.threat_models")
ATTACKS: Registry = Registry("attack", "fedattack.attacks")
ACTIVE: Registry = Registry("active_threat_model", "fedattack.attacks.active.servers")
