"""Reconstruction strategies: selection per method, the generic uplink, WAFFLe and q-FFL guesses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedattack.attacks.reconstruction.base import resolve
from fedattack.attacks.reconstruction.qffl import solve_loss
from fedattack.attacks.reconstruction.waffle import movement, two_means_high
from fedattack.federation.rundir import Federation
from fedattack.registry import THREAT_MODELS, TARGETS, UserError
from fedattack.target import Recipe

UP_DOWN = frozenset({"up", "down"})


def make(method: str, model: str = "digits-mlp"):  # type: ignore[no-untyped-def]
    cls = TARGETS.get(method)
    return cls(cls.make_hyper({}), model, (1, 8, 8), 10, Recipe(lr=0.1), 10)


def test_the_uplink_is_the_model_for_fedavg(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    view = THREAT_MODELS.get("eavesdropper")().view(fed, fed.transcript().clients()[0])
    obs = view.observation()
    (strategy,) = resolve("auto", view.target, obs.parts(), deployed_only=False)
    rec = strategy.reconstruct(view.target, obs, None, torch.Generator())  # type: ignore[arg-type]
    assert strategy.name == "uplink"
    assert all(torch.equal(rec.params[n], obs.up[n]) for n in view.target.param_names)


def test_oracle_uses_only_the_true_model() -> None:
    names = [s.name for s in resolve("all", make("fedavg"), UP_DOWN | {"deployed"}, deployed_only=True)]
    assert names == ["true"]


def test_a_strategy_that_does_not_apply_is_a_one_line_user_error() -> None:
    with pytest.raises(UserError, match="does not apply to fedavg.*applicable: uplink"):
        resolve("factors-inferred", make("fedavg"), UP_DOWN, deployed_only=False)
    with pytest.raises(UserError, match="unknown reconstruction"):
        resolve("no-such-strategy", make("fedavg"), UP_DOWN, deployed_only=False)


def test_waffle_gets_factor_guesses_not_the_bare_uplink() -> None:
    names = {s.name for s in resolve("all", make("waffle-ibp"), UP_DOWN, deployed_only=False)}
    assert {"factors-all-on", "factors-prior", "factors-inferred", "factors-prior-mean", "factors-fitted"} <= names
    assert "uplink" not in names
    only_up = {s.name for s in resolve("all", make("waffle-ibp"), frozenset({"up"}), deployed_only=False)}
    assert "factors-inferred" not in only_up  # it needs the same round's downlink


def test_two_means_finds_the_upper_cluster() -> None:
    values = torch.tensor([0.1, 5.0, 0.2, 4.8, 0.15, 5.2])
    assert two_means_high(values).tolist() == [0, 1, 0, 1, 0, 1]


def test_movement_singles_out_the_factors_that_changed() -> None:
    gen = torch.Generator().manual_seed(0)
    down = {"fc1.W_a": torch.randn(65, 8, generator=gen), "fc1.W_b": torch.randn(8, 64, generator=gen),
            "fc1.r": torch.full((8,), 0.1)}
    up = {k: v.clone() for k, v in down.items()}
    for k in (1, 4):
        up["fc1.W_a"][:, k] += 0.01 * torch.randn(65, generator=gen)
        up["fc1.W_b"][k] += 0.01 * torch.randn(64, generator=gen)
    up["fc1.W_a"] += 1e-7 * torch.randn(65, 8, generator=gen)  # the others barely move
    assert two_means_high(movement(down, up, "fc1").log()).nonzero().flatten().tolist() == [1, 4]


def test_qffl_decoding_inverts_the_scaled_update() -> None:
    q, lr, loss = 0.001, 0.1, 0.73
    w = {"a": torch.randn(2000, dtype=torch.float64)}  # a model-sized update keeps F below F*
    w_bar = {"a": w["a"] - 0.05 * torch.randn(2000, dtype=torch.float64)}
    step = (w["a"] - w_bar["a"]) / lr
    up = {"delta.a": loss ** q * step, "h": torch.tensor([q * loss ** (q - 1) * float((step ** 2).sum()) + loss ** q / lr])}
    assert solve_loss(up, q, 1 / lr) == pytest.approx(loss, rel=1e-4)
