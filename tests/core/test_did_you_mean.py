"""A mistyped name gets "did you mean" wherever it is looked up: every registry's names, every
plugin's setting keys and the values its settings accept, the command line's choices.

The tests iterate the registries, so a new plugin (or a new setting of one) is held to it the
moment it exists, without a list here.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Any

import pytest
from click.testing import CliRunner

from fedattack.registry import ALL_REGISTRIES, TARGETS, UserError
from fedattack.suggest import close_matches, did_you_mean

for _module in ("fedattack.attacks.hidden_parts.base", "fedattack.federation.executors",
                "fedattack.defences.base", "fedattack.experiments.backends.base"):
    importlib.import_module(_module)  # each declares a registry of its own


def typo(name: str) -> str:
    """A likely slip: a letter dropped from the middle, or a short name's last letter doubled."""
    if len(name) > 3:
        middle = len(name) // 2
        return name[:middle] + name[middle + 1:]
    return name + name[-1]


def suggested(message: str, meant: str) -> bool:
    head, sep, rest = message.partition("did you mean ")
    return bool(sep) and repr(meant) in rest.split("?")[0]


def registry_names() -> list[tuple[Any, str]]:
    return [(reg, name) for reg in ALL_REGISTRIES for name in reg.names()]


def test_close_matches_ignore_case_and_kebab_or_snake() -> None:
    assert close_matches("Shadow", ["shadows", "steps"]) == ["shadows"]
    assert close_matches("aux-sise", ["aux_size", "steps"]) == ["aux_size"]
    assert close_matches("lra", ["lira-offline", "lira-online", "rmia"]) == ["lira-offline", "lira-online"]
    assert did_you_mean("xyz", ["fedavg", "fedprox"]) == ""  # nothing close: no guess
    assert did_you_mean("fedav", ["fedavg", "scaffold"]) == " (did you mean 'fedavg'?)"


@pytest.mark.parametrize("registry, name", registry_names(), ids=lambda x: getattr(x, "kind", x))
def test_every_registered_name_is_suggested_for_its_typo(registry: Any, name: str) -> None:
    wrong = typo(name)
    if wrong in registry.names():
        pytest.skip(f"{wrong!r} is itself registered")
    with pytest.raises(UserError) as err:
        registry.get(wrong)
    assert suggested(str(err.value), name), str(err.value)


def _settings_classes() -> list[tuple[str, str, type]]:
    out = []
    for reg in ALL_REGISTRIES:
        for name, item in reg.items():
            for attr in ("Hyper", "Options", "Settings"):
                cls = getattr(item, attr, None)
                if cls is not None and dataclasses.is_dataclass(cls):
                    out.append((reg.kind, name, cls))
                    break
    return out


def build(kind: str, name: str, overrides: dict[str, Any]) -> Any:
    """A plugin's settings as its own entry point builds them from what a user wrote."""
    if kind == "target":
        return TARGETS.get(name).make_hyper(overrides)
    if kind == "attack":
        from fedattack.attacks.evaluation.request import build_attacks
        return build_attacks([name], overrides)
    if kind == "defence":
        from fedattack.defences.base import normalise_defence
        return normalise_defence({"name": name, "settings": overrides})
    if kind == "partition":
        from fedattack.data.partition import make_partition
        return make_partition(name, digits(), 3, 0, **overrides)
    from fedattack.options import build_dataclass
    return build_dataclass(_class_of(kind, name), overrides, f"{kind} {name}")


@functools.cache
def digits() -> Any:
    from fedattack.data import load_dataset
    return load_dataset("digits", None, False)


def _class_of(kind: str, name: str) -> type:
    return next(cls for k, n, cls in _settings_classes() if (k, n) == (kind, name))


def _fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.init]


SETTINGS = _settings_classes()
KEYS = [(kind, name, f.name) for kind, name, cls in SETTINGS for f in _fields(cls)]
VALUES = [(kind, name, f.name, f.default) for kind, name, cls in SETTINGS for f in _fields(cls)
          if isinstance(f.default, str) and f.default]


@pytest.mark.parametrize("kind, name, key", KEYS, ids=[f"{k}-{n}-{f}" for k, n, f in KEYS])
def test_every_setting_key_is_suggested_for_its_typo(kind: str, name: str, key: str) -> None:
    wrong = typo(key)
    if wrong in {f.name for f in _fields(_class_of(kind, name))}:
        pytest.skip(f"{wrong!r} is itself a setting")
    with pytest.raises(UserError) as err:
        build(kind, name, {wrong: "1"})
    assert suggested(str(err.value), key), str(err.value)


@pytest.mark.parametrize("kind, name, key, default", VALUES, ids=[f"{k}-{n}-{f}" for k, n, f, _ in VALUES])
def test_every_refused_value_suggests_the_accepted_one(kind: str, name: str, key: str, default: str) -> None:
    """A setting whose values are a fixed set (the default is one of them) answers a typo of its
    default with that default; a setting that takes free text accepts the typo, and is skipped."""
    wrong = typo(default)
    try:
        build(kind, name, {key: wrong})
    except UserError as exc:
        assert suggested(str(exc), default), str(exc)
    else:
        pytest.skip(f"{kind} {name} {key} takes {wrong!r}: free text, or a value of another form")


def cli(*args: str) -> str:
    from fedattack.cli import cli as group
    result = CliRunner().invoke(group, list(args))
    assert result.exit_code != 0
    return result.output


CLI_NAMES = [(option, section, name) for option, section in
             (("--method", "methods"), ("--dataset", "datasets"), ("--partition", "partitions"),
              ("--model", "models"))
             for name in __import__("fedattack.catalog", fromlist=["names"]).names(
                 __import__("fedattack.commands.list_cmd", fromlist=["SECTIONS"]).SECTIONS[section])]


@pytest.mark.parametrize("option, section, name", CLI_NAMES, ids=[f"{o}-{n}" for o, _, n in CLI_NAMES])
def test_train_names_suggest_before_anything_loads(option: str, section: str, name: str) -> None:
    assert suggested(cli("train", option, typo(name), "--out", "never-written"), name)


def test_list_section_and_click_choices_suggest() -> None:
    assert suggested(cli("list", "method"), "methods")
    assert suggested(cli("train", "--normalize", "non"), "none")


def test_a_mistyped_attack_setting_names_the_setting_meant() -> None:
    """The issue's case: `--set shadow=5`."""
    from fedattack.attacks.evaluation.request import build_attacks

    with pytest.raises(UserError, match=r"'shadow' \(did you mean 'shadows'"):
        build_attacks(["membership"], {"shadow": "5"})
    with pytest.raises(UserError, match=r"'shadows' \(attack .*membership.* has it: choose it too\)"):
        build_attacks(["inversion"], {"shadows": "5"})
