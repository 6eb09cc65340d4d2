"""Defences by declared composition (issue #42, item 6): built into the method's context before
the method, run by the method's own base class (no class made at run time, nothing assigned to
the method afterwards), and secure aggregation composes with any server that declares it reads
the uplinks only through their n_k-weighted mean, FedAvgM's momentum included."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fedattack.defences import DEFENCES, make_target
from fedattack.registry import TARGETS, UserError
from fedattack.target import State, TargetContext
from fedattack.wire import Message
from tests.defences._federate import federate
from tests.examples.one_file import load_example

CTX = TargetContext(model="digits-mlp", input_shape=(1, 8, 8), num_classes=10, num_clients=4, clients_per_round=3)
SECAGG = [{"name": "secure-aggregation", "settings": {}}]


@pytest.mark.parametrize("method", TARGETS.names())
def test_a_defended_method_is_the_method_itself(method: str) -> None:
    entries = [{"name": "clip"}, *SECAGG]
    try:
        target = make_target(method, {}, CTX, entries)
    except UserError:  # secure aggregation refuses the method: then clip alone
        entries = entries[:1]
        target = make_target(method, {}, CTX, entries)
    assert type(target) is TARGETS.get(method)
    assert target.ctx.defences is target.defences and [d.name for d in target.defences] == [e["name"] for e in entries]
    assert all(d.wraps is target for d in target.defences)
    with pytest.raises(UserError, match="already serves"):
        target.defences[0].serve(make_target(method, {}, CTX))


def test_every_defence_serves_a_plain_method() -> None:
    for name in DEFENCES.names():
        target = make_target("fedavg", {}, CTX, [{"name": name}])
        assert type(target) is TARGETS.get("fedavg") and target.defences[0].wraps is target


def test_secure_aggregation_composes_with_a_server_momentum(isolated_registries: None) -> None:
    load_example("fedavgm_target.py", TARGETS, "fedavgm", "FedAvgM")
    _, plain, _ = federate("fedavgm", [])
    target, masked, wire = federate("fedavgm", SECAGG)
    assert [d.name for d in target.defences] == ["secure-aggregation"]
    assert all(t.dtype == torch.int64 for m in wire if m.kind == "uplink" for t in m.payload.values())
    assert plain.server.keys() == masked.server.keys()
    for n in plain.server:  # the masks cancel; fixed point rounds at 2^-24
        torch.testing.assert_close(masked.server[n], plain.server[n], atol=1e-5, rtol=1e-5)
    moved = max(float((masked.server[n] - plain.server[n]).abs().max()) for n in plain.server)
    assert any(float(masked.server[f"momentum.{n}"].abs().max()) > 100 * moved for n in target.param_names)


def test_a_server_that_does_not_declare_it_is_refused(isolated_registries: None) -> None:
    load_example("fedavgm_target.py", TARGETS, "fedavgm", "FedAvgM")
    momentum = TARGETS.get("fedavgm")

    class Undeclared(momentum):  # what a user's subclass of the plugin would be
        def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
            return super().aggregate(server, uplinks[:1], rnd)  # reads one client's uplink

    assert momentum.reads_weighted_mean and not Undeclared.reads_weighted_mean
    defence = DEFENCES.get("secure-aggregation")(DEFENCES.get("secure-aggregation").Settings(), CTX)
    built = Undeclared(momentum.make_hyper({}), dataclasses.replace(CTX, defences=(defence,)))
    with pytest.raises(UserError, match="cannot wrap fedavgm.*reads_weighted_mean"):
        defence.serve(built)
