"""The flat layout's module names (and the three LiRA and two FedMIA modules, now one each) still
import, as the very modules that hold them now: a plugin written against them keeps working."""

from __future__ import annotations

import importlib

import pytest

from fedattack import attacks

OLD = sorted(attacks._OLD_NAMES)


@pytest.mark.parametrize("old", OLD)
def test_an_old_name_is_the_module_that_holds_it_now(old: str) -> None:
    served = importlib.import_module(f"fedattack.attacks.{old}")
    assert served is importlib.import_module(f"fedattack.attacks.{attacks._OLD_NAMES[old]}")


def test_the_merged_modules_keep_their_classes() -> None:
    from fedattack.attacks.fedmia_rmia import FedMiaRmia
    from fedattack.attacks.lira_online import LiraOnline
    from fedattack.attacks.membership.lira_rounds import LiraRounds
    from fedattack.attacks.reconstruction.waffle import FactorGuess
    from fedattack.attacks.update_inversion.family import UpdateInversionFamily

    assert {c.__module__ for c in (LiraOnline, LiraRounds)} == {"fedattack.attacks.membership.lira"}
    assert FedMiaRmia.__module__ == "fedattack.attacks.membership.fedmia"
    assert FactorGuess.__module__ == "fedattack.attacks.hidden_parts.waffle"
    assert UpdateInversionFamily.__module__ == "fedattack.attacks.data_reconstruction.inversion_family"
