"""Reading plugin registrations from source with `ast`, without importing the plugins.

Built-in plugins register in one of two literal ways: a class in the registry's package that
defines `name = "..."`, or a `@REGISTRY.register("...")` decorator on a module-level class or
function. This module reads both from parsed modules, with each item's docstring and its
settings dataclass (`Hyper`, `Options` or `Settings`) and literal defaults, and raises
`CannotTell` wherever the source does not say for certain; `fedattack.catalog` then imports.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SETTINGS_ATTRS = ("Hyper", "Options", "Settings")


class CannotTell(Exception):
    """The source does not say for certain; import the registry instead."""


@dataclass(frozen=True)
class Entry:
    """One registered item as `fedattack list` shows it."""

    name: str
    doc: str  # first docstring line
    settings: tuple[tuple[str, Any], ...]  # fields with a default, in declaration order

    def summary(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.settings)
        return f"{self.doc} [{fields}]" if fields else self.doc


def first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def registries_declared(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """variable -> (kind, package) of every literal `variable = Registry("kind", "package")`."""
    out = {}
    for node in tree.body:
        value, targets = _assignment(node)
        if len(targets) == 1 and isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Registry":
            args = [_literal(a) for a in value.args]
            if len(args) == 2 and all(isinstance(a, str) for a in args):
                out[targets[0]] = (args[0], args[1])
    return out


@cache
def parse(file: Path) -> ast.Module:
    return ast.parse(file.read_text(encoding="utf-8"), filename=str(file))


class Classes:
    """The scanned modules' classes, looked up by name as the module naming them would see them.

    A class imported from a module outside the scanned files (a settings base defined beside the
    plugin kind's base class) is read from that module when `locate` finds its source.
    """

    def __init__(self, files: list[tuple[Path, ast.Module]],
                 locate: Callable[[str], Path | None] | None = None) -> None:
        self.files = files
        self.own = {id(t): {n.name: n for n in t.body if isinstance(n, ast.ClassDef)} for _, t in files}
        self.by_stem = {f.stem: t for f, t in files}
        self.locate = locate

    def get(self, name: str, tree: ast.Module) -> tuple[ast.ClassDef, ast.Module] | None:
        if name in self.own[id(tree)]:
            return self.own[id(tree)][name], tree
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    source = self.by_stem.get(node.module.rsplit(".", 1)[-1]) or self._outside(node.module)
                    here = self.own[id(source)] if source is not None else {}
                    if (alias.asname or alias.name) == name and source is not None and alias.name in here:
                        return here[alias.name], source
        found = [(c[name], t) for (_, t), c in zip(self.files, self.own.values()) if name in c]
        if len(found) > 1:
            raise CannotTell(f"class {name} is defined in several modules")
        return found[0] if found else None

    def _outside(self, module: str) -> ast.Module | None:
        path = self.locate(module) if self.locate is not None and module.startswith("fedattack.") else None
        if path is None:
            return None
        tree = parse(path)
        self.own.setdefault(id(tree), {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)})
        return tree


def registered(tree: ast.Module, variable: str, classes: Classes, in_package: bool) -> list[Entry]:
    out = []
    for node in tree.body:  # plugins register at module level
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue
        for name in _decorator_names(node, variable):
            out.append(_entry(name, node, tree, classes))
        if in_package and isinstance(node, ast.ClassDef):
            name = _class_attr(node, "name")
            if name is not None and name != "":
                if not isinstance(name, str):
                    raise CannotTell(f"class {node.name} has a name that is not a string literal")
                out.append(_entry(name, node, tree, classes))
    return out


def _decorator_names(node: ast.ClassDef | ast.FunctionDef, variable: str) -> list[str]:
    found = []
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "register" \
                and getattr(dec.func.value, "id", None) == variable:
            name = _literal(dec.args[0]) if dec.args else None
            if not isinstance(name, str):
                raise CannotTell(f"{node.name} registers under a name that is not a string literal")
            found.append(name)
    return found


def _entry(name: str, node: ast.ClassDef | ast.FunctionDef, tree: ast.Module, classes: Classes) -> Entry:
    doc = ast.get_docstring(node)
    if doc is None and isinstance(node, ast.ClassDef) and node.decorator_list:
        raise CannotTell(f"{node.name} has no docstring; a decorator may write one")
    settings = _settings(node, tree, classes) if isinstance(node, ast.ClassDef) else ()
    return Entry(name, first_line(doc), settings)


def _settings(node: ast.ClassDef, tree: ast.Module, classes: Classes) -> tuple[tuple[str, Any], ...]:
    """The literal defaults of the first of Hyper/Options/Settings the class has (as list shows)."""
    for attr in SETTINGS_ATTRS:
        found = _inherited_attr(node, tree, attr, classes, set())
        if found is not None:
            value, where = found
            cls = classes.get(_simple_name(value), where)
            if cls is None or not _is_dataclass(cls[0]):
                raise CannotTell(f"{node.name}.{attr} is not a dataclass defined in the package")
            return tuple(_fields(*cls, classes).items())
    return ()


def _inherited_attr(node: ast.ClassDef, tree: ast.Module, attr: str, classes: Classes,
                    seen: set[int]) -> tuple[ast.expr, ast.Module] | None:
    """The value assigned to `attr` in the class or the first base that assigns it.

    Bases outside the scanned sources are the plugin kind's base class, whose settings are empty.
    """
    own = _class_attr_node(node, attr)
    if own is not None:
        return own, tree
    seen.add(id(node))
    for base in node.bases:
        parent = classes.get(_simple_name(base), tree)
        if parent is not None and id(parent[0]) not in seen:
            found = _inherited_attr(parent[0], parent[1], attr, classes, seen)
            if found is not None:
                return found
    return None


def _fields(cls: ast.ClassDef, tree: ast.Module, classes: Classes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for base in cls.bases:
        parent = classes.get(_simple_name(base), tree)
        if parent is None or not _is_dataclass(parent[0]):
            raise CannotTell(f"dataclass {cls.name} derives from {ast.unparse(base)}, which the scan cannot read")
        out.update(_fields(*parent, classes))
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        if any(word in ast.unparse(stmt.annotation) for word in ("ClassVar", "KW_ONLY", "InitVar")):
            continue
        has_default, default = _field_default(stmt.value)
        if has_default:
            out[stmt.target.id] = default
        else:
            out.pop(stmt.target.id, None)
    return out


def _field_default(value: ast.expr | None) -> tuple[bool, Any]:
    if value is None:
        return False, None
    if isinstance(value, ast.Call) and _simple_name(value.func) == "field":
        given = {k.arg: k.value for k in value.keywords}
        if "default" not in given:
            return False, None
        value = given["default"]
    literal = _literal(value, missing=CannotTell)
    return True, literal


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any(_simple_name(d.func if isinstance(d, ast.Call) else d) == "dataclass" for d in cls.decorator_list)


def _class_attr_node(node: ast.ClassDef, attr: str) -> ast.expr | None:
    for stmt in node.body:
        value, targets = _assignment(stmt)
        if attr in targets:
            if isinstance(value, ast.Tuple) and len(targets) > 1:
                return value.elts[targets.index(attr)] if len(value.elts) == len(targets) else _cannot(node, attr)
            return value
    return None


def _class_attr(node: ast.ClassDef, attr: str) -> Any:
    value = _class_attr_node(node, attr)
    return None if value is None else _literal(value, missing=CannotTell)


def _cannot(node: ast.ClassDef, attr: str) -> ast.expr:
    raise CannotTell(f"{node.name}.{attr} is not a literal")


def _assignment(node: ast.stmt) -> tuple[ast.expr | None, list[str]]:
    """(value, assigned names) of `a = v`, `a: T = v` or `a, b = v, w`; ([], None) otherwise."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.value, [node.target.id]
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return node.value, [target.id]
        if isinstance(target, ast.Tuple):
            return node.value, [getattr(e, "id", "") for e in target.elts]
    return None, []


def _simple_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


_ARITHMETIC: dict[type, Any] = {ast.Add: float.__add__, ast.Sub: float.__sub__, ast.Mult: float.__mul__,
                                 ast.Div: float.__truediv__}


def _literal(node: ast.expr, missing: type[Exception] | None = None) -> Any:
    """A literal's value; `2.0 / 3.0` counts (a default written as a fraction), names do not."""
    try:
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = ast.literal_eval(node.left), ast.literal_eval(node.right)
            if all(isinstance(v, float) for v in (left, right)):
                return _ARITHMETIC[type(node.op)](left, right)
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, ZeroDivisionError):
        if missing is not None:
            raise missing(f"{ast.unparse(node)} is not a literal") from None
        return None
