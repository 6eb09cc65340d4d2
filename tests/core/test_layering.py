"""docs/architecture.md's layers, read from the source: who imports whom.

The core (`fedattack/`) imports no method (`targets/`), no attack (`attacks/`) and no report
(`reports/`) at module level (the CLI reaches attacks and reports lazily, inside functions);
no method imports a private module of an executor (`executor_plugins/_*`); attacks import no
method. A method's kernel and everything only it uses live beside it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_imports(file: Path) -> set[str]:
    """The modules a file imports at module level (relative imports resolved within its package)."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    package = ".".join(_dotted(file).split(".")[:-1])
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _dotted(file: Path) -> str:
    rel = file.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("targets", "attacks", "reports"):
        parts = ["fedattack", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{file.relative_to(ROOT)} imports {m}" for file in files(folder) for m in sorted(module_imports(file))
            if m.startswith(forbidden)]


def test_the_core_imports_no_method_attack_or_report() -> None:
    assert not offenders("fedattack", ("fedattack.targets", "fedattack.attacks", "fedattack.reports", "targets",
                                       "attacks"))


def test_no_method_imports_an_executors_private_module_or_an_attack() -> None:
    assert not offenders("targets", ("fedattack.federation.executor_plugins._", "fedattack.attacks"))


def test_no_attack_imports_a_method() -> None:
    assert not offenders("attacks", ("fedattack.targets", "targets"))


def test_the_resolution_of_relative_imports() -> None:
    """So the checks above see what `from .kernel import ...` in targets/waffle/ really names."""
    assert "fedattack.targets.waffle.kernel.WaffleKernel" in module_imports(ROOT / "targets/waffle/method.py")
    assert "fedattack.targets._control.local_steps" in module_imports(ROOT / "targets/waffle/method.py")
