"""WAFFLE's agents at weight 0: the literal reading keeps updating their control variates; the
stabilising variants freeze or reset them, told by one downlink flag."""

from __future__ import annotations

import pytest
import torch

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.registry import UserError
from fedattack.target import ClientContext, Recipe, Target
from fedattack.targets.waffle_wavg import HISTORY, ZERO
from fedattack.training import sequential_train
from tests.conftest import run_rounds, tiny_spec

RECIPE = Recipe(epochs=1, batch_size=16, lr=0.1)


def _target(**hyper: object) -> Target:
    spec = tiny_spec(method="waffle-wavg", hyper=hyper, fraction=1.0, recipe=RECIPE)
    return build_target(spec, load_dataset("digits"), 4)


def _server_with_agent_2_at_zero(target: Target) -> dict[str, torch.Tensor]:
    server = target.init_server(torch.Generator().manual_seed(0))
    rows = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.6, 0.4, 0.0, 0.0], [0.7, 0.3, 0.0, 0.0],
                         [0.8, 0.2, 0.0, 0.0]], dtype=torch.float64)
    return {**server, HISTORY: rows}


def _client_round(target: Target, down: dict[str, torch.Tensor], private: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
    dataset = load_dataset("digits")
    partition = make_partition("shards", dataset.y_train.numpy(), 4, 0, "digits")
    data = client_data(dataset, partition, 2)
    return target.client_update(down, private, data, ClientContext(5, 2, 0, sequential_train))


def test_the_literal_reading_puts_nothing_new_on_the_wire() -> None:
    target = _target(reading="literal")
    server = _server_with_agent_2_at_zero(target)
    assert ZERO not in target.broadcast(server, 2, 5)
    assert ZERO not in target.wire_schema().downlink
    with pytest.raises(UserError):
        _target(zero_weight="drop")


@pytest.mark.parametrize("mode", ["keep", "freeze", "reset"])
def test_an_agent_at_weight_zero_keeps_freezes_or_resets_its_control_variate(mode: str) -> None:
    target = _target(zero_weight=mode)
    server = _server_with_agent_2_at_zero(target)
    if mode != "keep":
        assert target.wire_schema().downlink[ZERO] == (1,)
        assert float(target.broadcast(server, 1, 5)[ZERO][0]) == 0.0  # weight 0.2 and 0.3 > 0
        assert float(target.broadcast(server, 2, 5)[ZERO][0]) == 1.0  # three rounds at 0
    down = target.broadcast(server, 2, 5)
    gen = torch.Generator().manual_seed(3)
    old = {f"c.{n}": 0.1 * torch.randn(p.shape, generator=gen) for n, p in target.model.named_parameters()}
    up, new = _client_round(target, down, old)
    for n in target.param_names:
        if mode == "freeze":
            assert torch.equal(new[f"c.{n}"], old[f"c.{n}"])
        elif mode == "reset":
            assert torch.equal(new[f"c.{n}"], torch.zeros_like(old[f"c.{n}"]))
        else:
            assert not torch.equal(new[f"c.{n}"], old[f"c.{n}"])
        torch.testing.assert_close(up[f"dc.{n}"], new[f"c.{n}"] - old[f"c.{n}"])
    assert any(float(up[f"dy.{n}"].abs().max()) > 0 for n in target.param_names)  # still trains


def test_reset_trains_with_a_fresh_control_variate() -> None:
    target = _target(zero_weight="reset")
    server = _server_with_agent_2_at_zero(target)
    down = target.broadcast(server, 2, 5)
    gen = torch.Generator().manual_seed(3)
    old = {f"c.{n}": torch.randn(p.shape, generator=gen) for n, p in target.model.named_parameters()}
    up_old, _ = _client_round(target, down, old)
    up_fresh, _ = _client_round(target, down, {})
    for n in target.param_names:  # as a new agent (c_i = 0) trains
        assert torch.equal(up_old[f"dy.{n}"], up_fresh[f"dy.{n}"])


def test_a_frozen_federation_runs_and_flags_only_zero_weight_agents() -> None:
    spec = tiny_spec(method="waffle-wavg", hyper={"zero_weight": "freeze", "zero_below": 0.0, "delta_omega": 12.0},
                     fraction=1.0, rounds=6, num_clients=4, recipe=RECIPE)
    dataset = load_dataset("digits")
    target = build_target(spec, dataset, 4)
    partition = make_partition(spec.partition, dataset.y_train.numpy(), 4, 0, spec.dataset)
    datas = [client_data(dataset, partition, k) for k in range(4)]
    _, state, messages = run_rounds(spec, target, datas, make_executor("batched"))
    flags = {(m.round, m.receiver): float(m.payload[ZERO][0]) for m in messages if m.kind == "downlink"}
    assert flags[(1, 0)] == 0.0 and all(v in (0.0, 1.0) for v in flags.values())
    assert sum(flags.values()) >= 3  # some agents really sat at weight 0 (agent 1, here)
    history = state.server[HISTORY]
    for (rnd, k), flag in flags.items():
        expected = rnd > 1 and float(history[max(0, rnd - 4):rnd - 1, k].sum()) == 0.0
        assert flag == float(expected)
    for m in messages:
        if m.kind == "uplink" and flags[(m.round, m.sender)] == 1.0:
            assert all(float(v.abs().max()) == 0.0 for k, v in m.payload.items() if k.startswith("dc."))


def test_zero_below_counts_an_agent_with_tiny_weights_as_excluded() -> None:
    """Agent 1's weights 0.3, 0.4, 0.3, 0.2 (mean over the last three 0.3) and agent 2's 0.2, 0,
    0, 0: exactly 0 only for zero_below = 0 (the literal reading's); with zero_below the mean
    decides."""
    server = _server_with_agent_2_at_zero(_target(zero_weight="freeze"))
    server[HISTORY] = server[HISTORY].clone()
    server[HISTORY][-1, 2] = 0.01  # a tiny weight in the last round
    exact = _target(zero_weight="freeze", zero_below=0.0)
    below = _target(zero_weight="freeze", zero_below=0.02)
    assert not exact.weight_is_zero(server, 2) and below.weight_is_zero(server, 2)
    assert not below.weight_is_zero(server, 1)
    assert float(below.broadcast(server, 2, 5)[ZERO][0]) == 1.0
    with pytest.raises(UserError, match="zero_below"):
        _target(zero_weight="freeze", zero_below=1.5)


def test_a_reading_names_its_three_settings_and_a_setting_given_alone_wins() -> None:
    literal, stabilised = _target(reading="literal").hyper, _target(reading="stabilised").hyper
    assert (literal.zero_weight, literal.zero_below, literal.control) == ("keep", 0.0, "increments")
    assert (stabilised.zero_weight, stabilised.zero_below, stabilised.control) == ("freeze", 0.05, "variates")
    mixed = _target(reading="stabilised", control="increments", zero_below=0.0).hyper
    assert (mixed.zero_weight, mixed.zero_below, mixed.control) == ("freeze", 0.0, "increments")
    with pytest.raises(UserError, match="reading"):
        _target(reading="relaxed")
