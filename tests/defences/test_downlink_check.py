"""The client-side check (`downlink-check`): it refuses the active servers' downlinks it can see
(a module in front of the model, a model of zeros, a first layer replaced after a round the client
took part in), sends back a zero update for them, and refuses nothing on honest federations."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.federation.rundir import Federation
from tests.active.conftest import readout, train

CHECK = "downlink-check"


def accounting(run: Path) -> dict:  # type: ignore[type-arg]
    entry = next(d for d in Federation(run).manifest["defences"] if d["name"] == CHECK)
    return entry["accounting"]


@pytest.mark.parametrize("method", ["fedavg", "waffle-ibp"])
def test_honest_federations_raise_no_false_alarm(method: str, tmp_path: Path) -> None:
    run = train(tmp_path / "run", None, (CHECK,), rounds=6, fraction=0.3, method=method)
    checked = accounting(run)
    assert checked["checked"] == 18 and checked["refused"] == 0, checked


def test_a_module_in_front_of_the_model_is_refused_and_nothing_is_read(tmp_path: Path) -> None:
    run = train(tmp_path / "run", "imprint:rounds=1", (CHECK,), rounds=1)
    checked = accounting(run)
    assert checked["refused"] == 10 and "is not in the method's model" in checked["reasons"]
    result = readout(run, tmp_path / "out", (0,))[0]
    assert result.metrics["recovered_20"] == 0.0


def test_replaced_weights_are_refused_only_by_a_client_that_saw_the_last_round(tmp_path: Path) -> None:
    later = accounting(train(tmp_path / "later", "trap-weights:rounds=2", (CHECK,), rounds=2))
    assert later["refused"] == 10 and any("turned away" in r for r in later["reasons"])
    first = accounting(train(tmp_path / "first", "trap-weights:rounds=1", (CHECK,), rounds=1))
    assert first["refused"] == 0  # a client's first downlink has nothing to compare with


def test_model_inconsistency_passes_the_victims_check(tmp_path: Path) -> None:
    run = train(tmp_path / "run", "model-inconsistency:rounds=1", (CHECK, "secure-aggregation"), rounds=1)
    checked = accounting(run)
    victim = Federation(run).manifest["active_adversary"]["acted"][0]["victim"]
    assert checked["refused"] == 9 and victim not in {r["client"] for r in checked["refusals"]}
