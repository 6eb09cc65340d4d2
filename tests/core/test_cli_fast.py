"""Fast start: help, listing and usage errors answer without importing torch."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from click.testing import CliRunner

from fedattack.catalog import CannotTell, RegistryRef
from fedattack.commands.list_cmd import SECTIONS
from fedattack.commands.options import RegistryName
from fedattack.source_scan import Classes, registered

RECONSTRUCTIONS = RegistryRef("fedattack.attacks.hidden_parts.base", "RECONSTRUCTIONS")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_the_cli_and_every_command_does_not_import_torch() -> None:
    code = ("import importlib, pkgutil, fedattack.cli, fedattack.commands\n"
            "for m in pkgutil.iter_modules(fedattack.commands.__path__):\n"
            "    importlib.import_module('fedattack.commands.' + m.name)")
    assert "torch" not in _modules_after(code)


@pytest.mark.parametrize("args", [["--help"], ["list"], ["list", "attacks"], ["train", "--help"],
                                  ["train", "--method", "nope"], ["evaluate", "--help"]])
def test_help_list_and_usage_errors_do_not_import_torch(args: list[str]) -> None:
    code = (f"from fedattack.cli import cli\ntry:\n    cli.main({args!r}, standalone_mode=False)\n"
            "except Exception:\n    pass")
    loaded = _modules_after(code)
    assert not loaded & {"torch", "torchvision", "numpy"}
    assert not [m for m in loaded if m.startswith("fedattack.attacks.") and m.count(".") > 2]  # no attack module


def test_the_source_scan_agrees_with_importing() -> None:
    """In a fresh process: other tests register plugins from files, which a scan cannot see."""
    code = ("from fedattack.catalog import RegistryRef, imported, scanned\n"
            "from fedattack.commands.list_cmd import SECTIONS\n"
            f"for ref in [*SECTIONS.values(), RegistryRef({RECONSTRUCTIONS.module!r}, {RECONSTRUCTIONS.variable!r})]:\n"
            "    assert scanned(ref) == imported(ref), (ref, scanned(ref), imported(ref))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_computed_name_makes_the_scan_give_up() -> None:
    tree = ast.parse("NAME = 'x'\nclass A(Base):\n    name = NAME\n")
    with pytest.raises(CannotTell):
        registered(tree, "REG", Classes([]), in_package=True)


def test_a_non_literal_default_makes_the_scan_give_up() -> None:
    source = ("from dataclasses import dataclass\nimport math\n@dataclass\nclass Hyper:\n    x: float = math.pi\n"
              "class A(Base):\n    '''Doc.'''\n    name = 'a'\n    Hyper = Hyper\n")
    tree = ast.parse(source)
    from pathlib import Path
    with pytest.raises(CannotTell):
        registered(tree, "REG", Classes([(Path("a.py"), tree)]), in_package=True)


def test_registry_names_are_checked_case_insensitively_with_a_pointer_to_list() -> None:
    kind = RegistryName("TARGETS", "methods")
    assert kind.convert("FedAvg", None, None) == "fedavg"
    result = CliRunner().invoke(__import__("fedattack.cli").cli.cli, ["train", "--method", "nope"])
    assert result.exit_code == 2
    assert "fedattack list methods" in result.output and "fedavg" in result.output


def test_installed_entry_point_plugins_make_listing_import_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    import fedattack.catalog as catalog

    ref = SECTIONS["methods"]
    calls: list[RegistryRef] = []
    monkeypatch.setattr(catalog.importlib.metadata, "entry_points", lambda group: ["a plugin"])
    monkeypatch.setattr(catalog, "imported", lambda r: calls.append(r) or [])
    catalog.scanned.cache_clear()
    try:
        assert catalog.entries(ref) == [] and calls == [ref]
    finally:
        catalog.scanned.cache_clear()


@pytest.mark.parametrize("args", [["train", "--partition-opt", "x"], ["train", "--device", "tpu"]])
def test_mistakes_found_before_training_are_reported_without_importing_torch(args: list[str]) -> None:
    code = (f"from fedattack.cli import main\nimport sys\nsys.argv = ['fedattack', *{args!r}]\ntry:\n    main()\n"
            "except SystemExit as exc:\n    assert exc.code == 2, exc.code")
    assert "torch" not in _modules_after(code)


def test_names_a_plugin_file_registered_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    from fedattack.registry import TARGETS

    kind = RegistryName("TARGETS", "methods")
    monkeypatch.setitem(TARGETS._items, "my-plugin-method", object())
    assert kind.convert("my-plugin-method", None, None) == "my-plugin-method"
