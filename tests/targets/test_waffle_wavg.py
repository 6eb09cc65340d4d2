"""WAFFLE: the schedule of eq. (4), CalcWeights (Algorithm 1), the final local phase."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data
from fedattack.federation.train import build_target
from fedattack.target import Recipe
from fedattack.targets.waffle_wavg import CI, HISTORY, calc_weights, omega
from tests.conftest import received, tiny_spec


def _target(**hyper):  # type: ignore[no-untyped-def]
    spec = tiny_spec(method="waffle-wavg", hyper=hyper, fraction=1.0,
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1))
    return build_target(spec, load_dataset("digits"), 4)


def test_schedule_length_is_the_federations_rounds_unless_set() -> None:
    spec = tiny_spec(method="waffle-wavg", rounds=37, fraction=1.0)
    assert build_target(spec, load_dataset("digits"), 4).schedule_rounds() == 37
    assert build_target(dataclasses.replace(spec, hyper={"rounds": 80}), load_dataset("digits"),
                        4).schedule_rounds() == 80


def test_schedule_moves_from_global_to_local() -> None:
    assert omega(0, 100, 3.2) == pytest.approx(0.961, abs=1e-3)
    assert omega(50, 100, 3.2) == pytest.approx(0.5)
    assert omega(100, 100, 3.2) == pytest.approx(0.039, abs=1e-3)


def test_calc_weights_follows_equations_2_and_3() -> None:
    d = torch.tensor([0.0, 1.0, 2.0, 4.0], dtype=torch.float64)
    # Omega = Psi = 1: Alice's virtual distance is dm = 1, so she ties with agent 1
    raw = torch.tensor([1.0, 1.0, 1.0 - 1.0 / 3.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(calc_weights(d, 0, 1.0, 1.0), raw / raw.sum())
    # Omega = Psi = 0.5: d_Alice = 1 * (1 - 0.75 * 0.5) = 0.625, span 3.375
    w = calc_weights(d, 0, 0.5, 0.5)
    expect = (0.5 - (torch.tensor([0.625, 1, 2, 4], dtype=torch.float64) - 0.625) / 3.375).clamp(min=0)
    torch.testing.assert_close(w, expect / expect.sum())
    assert w[0] > w[1] > w[2] and w[3] == 0


def _uplinks(target, scale: float) -> list[dict[str, torch.Tensor]]:  # type: ignore[no-untyped-def]
    """Agent 1's update is Alice's (agent 0) plus a little noise; agents 2 and 3 are far away."""
    g = torch.Generator().manual_seed(1)
    ups: list[dict[str, torch.Tensor]] = [{} for _ in range(4)]
    for n, p in target.model.named_parameters():
        base = scale * torch.randn(p.shape, generator=g)
        for k, spread in enumerate((0.0, 0.01, 1.0, 2.0)):
            ups[k][f"dy.{n}"] = base + spread * scale * torch.randn(p.shape, generator=g)
            ups[k][f"dc.{n}"] = torch.randn(p.shape, generator=g)
    return ups


def test_last_rounds_train_on_alice_alone_after_smoothing() -> None:
    target = _target(rounds=20, alice=0)
    server = target.init_server(torch.Generator().manual_seed(0))
    ups = _uplinks(target, 0.1)
    applied = []
    for rnd in range(15, 21):  # 0.95 R = 19: rounds 19 and 20 are local
        msgs = received(ups, [10] * 4, rnd=rnd)
        applied.append(target.combine(server, msgs, rnd)[0])
        server = target.aggregate(server, msgs, rnd)
    rows = server[HISTORY]
    assert rows.shape == (6, 4)
    torch.testing.assert_close(rows.sum(1), torch.ones(6, dtype=torch.float64))
    assert all(0 < float(r[1]) < float(r[0]) for r in rows[:4])  # the near agent still counts
    assert all(float(r[0]) == 1.0 for r in rows[4:])  # r >= 0.95 R: Alice alone
    # the weights used are the mean of the last three rounds' weights (Algorithm 1, line 10)
    torch.testing.assert_close(torch.tensor(applied[-1], dtype=torch.float64), rows[-3:].mean(0))
    assert applied[-1][1] > 0


@pytest.mark.parametrize("reading", ["literal", "stabilised"])
def test_a_round_without_alice_moves_nothing(reading: str) -> None:
    """Neither the model, c nor the weights; under control=variates the server's record of each
    agent's c_i still adds the dc it uploaded, since the agent's own c_i moved by it."""
    target = _target(alice=0, reading=reading)
    server = target.init_server(torch.Generator().manual_seed(0))
    ups = _uplinks(target, 1.0)[:2]
    after = target.aggregate(server, received(ups, [10, 10], senders=[1, 3]), 1)
    assert all(torch.equal(after[n], server[n]) for n in server if not n.startswith(CI))
    for n in target.param_names if target.hyper.control == "variates" else ():
        torch.testing.assert_close(after[CI + n][[1, 3]], torch.stack([u[f"dc.{n}"] for u in ups]))
        assert torch.equal(after[CI + n][[0, 2]], server[CI + n][[0, 2]])


def test_uniform_weights_step_by_the_mean_update() -> None:
    """With delta_omega = 0 every agent equidistant gets 1/N: SCAFFOLD with everyone taking part."""
    target = _target(delta_omega=0.0)
    server = target.init_server(torch.Generator().manual_seed(0))
    ups = _uplinks(target, 0.0)  # identical (zero) dy: every distance 0
    after = target.aggregate(server, received(ups, [5, 10, 20, 40]), 1)
    for n, _ in target.model.named_parameters():
        torch.testing.assert_close(after[f"c.{n}"], server[f"c.{n}"] + sum(u[f"dc.{n}"] for u in ups) / 4)


def test_an_overflowed_agent_is_left_out_and_the_model_stays_finite() -> None:
    target = _target()
    server = target.init_server(torch.Generator().manual_seed(0))
    ups = _uplinks(target, 0.1)
    for key in ups[3]:
        ups[3][key] = torch.full_like(ups[3][key], float("inf"))
    after = target.aggregate(server, received(ups, [10] * 4), 1)
    assert float(after[HISTORY][-1][3]) == 0.0  # the limit of eq. (3) as its distance grows
    assert all(bool(torch.isfinite(after[n]).all()) for n in target.param_names)


def test_control_variates_mode_keeps_c_the_weighted_mean_of_the_agents_variates() -> None:
    """With equal weights both modes are SCAFFOLD's; in "variates" c is always sum_i alpha_i c_i."""
    spec = tiny_spec(method="waffle-wavg", hyper={"control": "variates"}, fraction=1.0, rounds=3,
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1))
    dataset = load_dataset("digits")
    target = build_target(spec, dataset, 4)
    partition = make_partition(spec.partition, dataset.y_train.numpy(), 4, spec.seed, spec.dataset,
                               **spec.partition_options)
    datas = [client_data(dataset, partition, k) for k in range(4)]
    loop = RoundLoop(spec, target, datas, make_executor("sequential"), lambda m: None)
    seen: list[tuple[list[int], list[float]]] = []
    own = target.after_combine

    def spy(server, uplinks, coeffs):  # type: ignore[no-untyped-def]
        seen.append(([m.sender for m in uplinks], coeffs))
        return own(server, uplinks, coeffs)

    target.after_combine = spy  # type: ignore[method-assign]  # observe the round's coefficients
    state = loop.start()
    for rnd in range(1, 4):
        loop.run_round(state, rnd)
        senders, coeffs = seen[-1]
        assert len(set(coeffs)) > 1  # the weights really differ, so the modes would disagree
        for n in target.param_names:
            expect = sum(a * state.private[k][f"c.{n}"] for a, k in zip(coeffs, senders))
            torch.testing.assert_close(state.server[f"c.{n}"], expect, atol=1e-5, rtol=1e-4)
