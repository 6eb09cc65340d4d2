"""The client-side check (`downlink-check`): it refuses the active servers' downlinks it can see
(a module in front of the model, a model of zeros, a first layer replaced after a round the client
took part in), sends back a zero update for them, and refuses nothing on honest federations of any
registered method (SCAFFOLD's and WAFFLE's control variates start at zero: protocol state, not the
model, `Target.downlink_weights`). A method whose own first downlink it would refuse is refused in
one line before training, not trained into nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedattack.federation.rundir import Federation
from fedattack.registry import TARGETS, UserError
from fedattack.target import State, Target
from fedattack.targets.fedavg import FedAvg
from tests.active.conftest import readout, train

CHECK = "downlink-check"


def accounting(run: Path) -> dict:  # type: ignore[type-arg]
    entry = next(d for d in Federation(run).manifest["defences"] if d["name"] == CHECK)
    return entry["accounting"]


@pytest.mark.parametrize("method", TARGETS.names())
def test_honest_federations_of_every_method_raise_no_false_alarm(method: str, tmp_path: Path) -> None:
    run = train(tmp_path / "run", None, (CHECK,), rounds=6, fraction=0.3, method=method)
    checked = accounting(run)
    assert checked["checked"] == 18 and checked["refused"] == 0, checked
    moved = Federation(run).metrics()["rounds"][-1]["accuracy"]
    assert sum(moved) / len(moved) > 0.3  # it trained (untrained: about 0.1)


class ZeroStart(FedAvg):
    """A method whose first layer starts at zero and that does not say so (not registered)."""

    def init_server(self, gen: torch.Generator) -> State:
        server = super().init_server(gen)
        return {**server, "fc1.weight": server["fc1.weight"] * 0}


def test_a_method_whose_own_first_downlink_it_would_refuse_is_refused_before_training() -> None:
    from fedattack.defences.base import build_defence
    from tests.active.conftest import built

    _, target, _ = built("fedavg", None)
    check = build_defence({"name": CHECK}, target.ctx)
    zero: Target = ZeroStart(target.hyper, target.ctx)
    with pytest.raises(UserError, match="own first downlink .*fc1.weight is all zeros.*train nothing") as refused:
        check.bind(zero)
    assert "\n" not in str(refused.value)
    check.bind(target)  # the method as registered passes


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


def test_a_refused_downlink_is_not_what_the_client_compares_the_next_one_with(tmp_path: Path) -> None:
    """After refusing the traps of round 2, each client takes round 3's honest model: it compares it
    with round 1's, the last one it accepted, not with the traps."""
    checked = accounting(train(tmp_path / "run", "trap-weights:rounds=2", (CHECK,), rounds=3))
    assert checked["checked"] == 30 and checked["refused"] == 10, checked
    assert {r["round"] for r in checked["refusals"]} == {2}


def test_model_inconsistency_passes_the_victims_check(tmp_path: Path) -> None:
    run = train(tmp_path / "run", "model-inconsistency:rounds=1", (CHECK, "secure-aggregation"), rounds=1)
    checked = accounting(run)
    victim = Federation(run).manifest["active_adversary"]["acted"][0]["victim"]
    assert checked["refused"] == 9 and victim not in {r["client"] for r in checked["refusals"]}
