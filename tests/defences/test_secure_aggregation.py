"""Secure aggregation: no recorded uplink reveals a client's update; the aggregate is unchanged."""

from __future__ import annotations

import pytest
import torch

from fedattack.defences import defence_entries, make_target
from fedattack.registry import UserError
from fedattack.target import TargetContext
from tests.defences._federate import federate

SECAGG = [{"name": "secure-aggregation", "settings": {}}]


@pytest.mark.parametrize("method", ["fedavg", "fedper"])
def test_the_aggregate_equals_the_undefended_federations(method: str) -> None:
    _, plain, _ = federate(method, [])
    _, masked, _ = federate(method, SECAGG)
    assert plain.server.keys() == masked.server.keys()
    for n in plain.server:
        torch.testing.assert_close(masked.server[n], plain.server[n], atol=1e-5, rtol=1e-5)


def test_no_recorded_uplink_reveals_a_single_clients_update() -> None:
    target, _, masked = federate("fedavg", SECAGG)
    _, _, plain = federate("fedavg", [])
    truth = {(m.round, m.client): m for m in plain if m.kind == "uplink" and m.round == 1}
    ring = 2**62
    for m in (m for m in masked if m.kind == "uplink" and m.round == 1):  # round 1: same inputs
        true = truth[(m.round, m.client)]
        for n, t in m.payload.items():
            assert t.dtype == torch.int64 and not torch.equal(t.float(), true.payload[n])
            high = (t >= ring // 2).double().mean().item()  # top bit of a uniform ring element
            assert abs(high - 0.5) < 0.1, (n, high)
            seen = t.double().flatten()
            signal = (true.payload[n].double() * float(m.samples or 1)).flatten()  # what the client masks
            corr = torch.corrcoef(torch.stack([seen, signal]))[0, 1].abs().item()
            assert corr < 6 / seen.numel() ** 0.5, (n, corr)
        assert target.read_uplink(None, m.payload) is None  # the wire decodes to nothing


def test_a_method_with_its_own_aggregate_is_refused_in_one_line() -> None:
    ctx = TargetContext(model="digits-mlp", input_shape=(1, 8, 8), num_classes=10, num_clients=4,
                        clients_per_round=3)
    with pytest.raises(UserError, match="cannot wrap scaffold") as err:
        make_target("scaffold", {}, ctx, SECAGG)
    assert "\n" not in str(err.value)
    clip = {"name": "clip", "settings": {}}
    with pytest.raises(UserError, match="last"):
        make_target("fedavg", {}, ctx, [*SECAGG, clip])
    make_target("fedavg", {}, ctx, [clip, *SECAGG])  # masks outermost: fine


@pytest.mark.parametrize("method", ["fedavg", "scaffold"])
def test_around_dp_fedavg_the_masked_sum_is_the_plain_sum_dp_needs(method: str) -> None:
    dp = {"name": "dp-fedavg", "settings": {"noise": "client", "noise_multiplier": 0.5, "clip_norm": 0.1}}
    _, alone, _ = federate(method, [dp])
    target, masked, wire = federate(method, [dp, *SECAGG])
    assert [e["name"] for e in defence_entries(target)] == ["dp-fedavg", "secure-aggregation"]
    assert all(t.dtype == torch.int64 for m in wire if m.kind == "uplink" for t in m.payload.values())
    for n in alone.server:
        torch.testing.assert_close(masked.server[n], alone.server[n], atol=1e-5, rtol=1e-5)


def test_attacks_see_that_a_masked_wire_decodes_to_nothing() -> None:
    from fedattack.attacks.hidden_parts.generic import decodes_whole_model

    ctx = TargetContext(model="digits-mlp", input_shape=(1, 8, 8), num_classes=10, num_clients=4,
                        clients_per_round=3)
    masked = make_target("fedavg", {}, ctx, SECAGG)
    assert decodes_whole_model(masked) == "fedavg under secure-aggregation masks every uplink"
    assert decodes_whole_model(make_target("fedavg", {}, ctx, [{"name": "clip"}])) is None
