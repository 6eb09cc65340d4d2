"""A zoo of real DP bugs: dp-fedavg variants that each get one thing wrong and still state the
correct accountant's epsilon, so that an audit can be shown to catch them.

Each bug is one file of this package that registers itself in `BUGS` (not in the defences'
registry: a bug is never offered to a user as a defence, and the tests that iterate over every
defence do not meet it). `planted(name)` lends it to the defences' registry for as long as an
audit runs, so a spec can name it like any defence. Every bug names the correct implementation
it is measured against (`correct`, dp-fedavg with the same settings) and the settings that let
it show (`exposing`: noise sigma instead of sigma x C only matters when C > 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from fedattack.defences.base import DEFENCES
from fedattack.defences.dp_fedavg import DPFedAvg
from fedattack.registry import Registry

BUGS: Registry[type[Bug]] = Registry("dp-bug", "fedattack.audit.zoo")


class Bug(DPFedAvg):
    """Base of the zoo: set `name`, say what is wrong in the docstring's first line (read as
    `wrong` by the tables, and by `fedattack list dp-bugs` from the source), and override what
    the bug changes."""

    wrong: ClassVar[str] = ""
    correct: ClassVar[str] = "dp-fedavg"
    exposing: ClassVar[Mapping[str, Any]] = {}  # dp settings under which the bug shows
    rounds: ClassVar[int] = 2                    # rounds of the test's federation that show it
    one_run: ClassVar[bool] = True               # caught by one white-box run of 256 canaries there

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # deliberately not Defence's registration: a bug joins BUGS only
        if cls.__dict__.get("name"):
            lines = (cls.__dict__.get("__doc__") or "").strip().splitlines()
            if not lines:
                raise TypeError(f"the zoo bug {cls.name} must say what is wrong in its docstring's first line")
            cls.wrong = lines[0].strip()
            BUGS.add(cls.name, cls)

    @contextlib.contextmanager
    def using(self, **changes: Any) -> Iterator[None]:
        """Run the correct code with other settings (the bug), keeping the stated ones for accounting."""
        stated = self.settings
        self.settings = dataclasses.replace(stated, **changes)
        try:
            yield
        finally:
            self.settings = stated


@contextlib.contextmanager
def planted(*names: str) -> Iterator[None]:
    """Lend the named bugs to the defences' registry while the block runs."""
    saved = DEFENCES.snapshot()
    try:
        for name in names:
            DEFENCES.add(name, BUGS.get(name))
        yield
    finally:
        DEFENCES.restore(saved)


def with_bug(defences: tuple[dict[str, Any], ...], bug: str) -> tuple[dict[str, Any], ...]:
    """A spec's defences with its dp-fedavg replaced by `bug` (its exposing settings on top)."""
    cls = BUGS.get(bug)
    out = tuple({"name": bug, "settings": {**d.get("settings", {}), **cls.exposing}}
                if d.get("name") == cls.correct else d for d in defences)
    if out == defences:
        raise ValueError(f"no {cls.correct} among the defences to replace by {bug}")
    return out


def bug_names(defences: tuple[dict[str, Any], ...]) -> list[str]:
    """The defences of a spec that are zoo bugs (to plant before the spec is built)."""
    return [str(d.get("name")) for d in defences if d.get("name") in BUGS and d.get("name") not in DEFENCES]
