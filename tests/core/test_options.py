"""One option coercion for hyperparameters, settings and partition options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from fedattack.options import build_dataclass, coerce
from fedattack.registry import UserError


@dataclass(frozen=True)
class Example:
    rate: float = 0.1
    steps: int = 10
    fast: bool = False
    label: str = "a"
    classes: tuple[int, ...] = ()
    limit: int | None = None
    mode: Literal["mean", "max"] = "mean"


def test_command_line_strings_become_the_declared_types() -> None:
    built = build_dataclass(Example, {"rate": "0.5", "steps": "3", "fast": "yes", "label": " b ",
                                      "classes": "1,3", "limit": "none", "mode": "max"}, "method x")
    assert built == Example(rate=0.5, steps=3, fast=True, label="b", classes=(1, 3), limit=None, mode="max")


def test_json_values_are_checked_too() -> None:
    assert build_dataclass(Example, {"rate": 1, "classes": [2, 4], "limit": 7}, "m") == Example(
        rate=1.0, classes=(2, 4), limit=7)
    with pytest.raises(UserError, match="steps must be int, got 2.5"):
        build_dataclass(Example, {"steps": 2.5}, "m")


def test_kebab_keys_are_accepted_and_unknown_keys_list_the_known_ones() -> None:
    assert build_dataclass(Example, {"rate": "1"}, "m").rate == 1.0
    with pytest.raises(UserError, match=r"method fedprox has no setting 'rte' \(did you mean 'rate'\?\); "
                                        "valid settings: rate, steps"):
        build_dataclass(Example, {"rte": "1"}, "method fedprox")


@pytest.mark.parametrize("written", ["nan", "inf", "-inf", float("nan")])
def test_non_finite_floats_are_refused_naming_the_field_and_the_value(written: object) -> None:
    with pytest.raises(UserError) as info:
        build_dataclass(Example, {"rate": written}, "method fedprox")
    message = str(info.value)
    assert "method fedprox setting rate" in message and repr(written) in message and "\n" not in message


@pytest.mark.parametrize("hint, value", [(bool, "maybe"), (int, "x"), (str, 3), (Literal["a"], "b"),
                                         (tuple[int, int], "1,2,3")])
def test_wrong_values_are_one_line_user_errors(hint: object, value: object) -> None:
    with pytest.raises(UserError):
        coerce(value, hint, "field")
