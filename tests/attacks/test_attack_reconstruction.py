"""Reconstruction strategies select on what a method declares (its decoder and its hidden parts),
never on its name: the decoded uplink, hidden parameters, WAFFLe's selection, q-FFL's decoding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedattack.attacks.hidden_parts.base import CLIENT_MODEL, DEPLOYED_MODEL, resolve
from fedattack.attacks.hidden_parts.waffle import movement, two_means_high
from fedattack.federation.rundir import Federation
from fedattack.registry import THREAT_MODELS, UserError
from fedattack.target import Recipe
from fedattack.targets.qffl import solved_loss
from tests.conftest import build

UP_DOWN = frozenset({"up", "down"})


def make(method: str, model: str = "digits-mlp"):  # type: ignore[no-untyped-def]
    return build(method, model=model, recipe=Recipe(lr=0.1))


def test_the_uplink_is_the_model_for_fedavg(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    view = THREAT_MODELS.get("eavesdropper")().view(fed, fed.transcript().clients()[0])
    obs = view.observation()
    (strategy,) = resolve("auto", view.target, obs.parts(), CLIENT_MODEL)
    rec = strategy.reconstruct(view.target, obs, None, torch.Generator())  # type: ignore[arg-type]
    assert strategy.name == "decoded"
    assert all(torch.equal(rec.params[n], obs.up[n]) for n in view.target.param_names)


def test_oracle_uses_only_the_true_model() -> None:
    names = [s.name for s in resolve("all", make("fedavg"), UP_DOWN | {"deployed"}, DEPLOYED_MODEL)]
    assert names == ["true"]


def test_a_strategy_that_does_not_apply_is_a_one_line_user_error() -> None:
    with pytest.raises(UserError, match="does not apply to fedavg.*applicable: decoded"):
        resolve("factors-inferred", make("fedavg"), UP_DOWN, CLIENT_MODEL)
    with pytest.raises(UserError, match="unknown reconstruction"):
        resolve("no-such-strategy", make("fedavg"), UP_DOWN, CLIENT_MODEL)


def test_waffle_gets_factor_guesses_not_the_bare_uplink() -> None:
    names = {s.name for s in resolve("all", make("waffle-ibp"), UP_DOWN, CLIENT_MODEL)}
    assert {"factors-all-on", "factors-prior", "factors-inferred", "factors-prior-mean", "factors-fitted"} <= names
    assert "decoded" not in names
    only_up = {s.name for s in resolve("all", make("waffle-ibp"), frozenset({"up"}), CLIENT_MODEL)}
    assert "factors-inferred" not in only_up  # it needs the same round's downlink


def test_auto_guesses_waffles_selection_with_the_strongest_measured_strategy() -> None:
    """`auto` is what a default audit reports, so it must not be the guess that measured weakest
    for membership (factors-inferred, 0.04-0.12 AUC below factors-all-on; see the module
    docstring of attacks/hidden_parts/waffle.py)."""
    target = make("waffle-ibp")
    (auto,) = resolve("auto", target, UP_DOWN, CLIENT_MODEL)
    assert auto.name == "factors-all-on"
    order = [s.name for s in resolve("all", target, UP_DOWN, CLIENT_MODEL)]
    assert order.index("factors-all-on") < order.index("factors-inferred")


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
    h = q * loss ** (q - 1) * float((step ** 2).sum()) + loss ** q / lr
    up = {"delta.a": loss ** q * step, "h": torch.tensor([h])}
    assert solved_loss(up, q, 1 / lr) == pytest.approx(loss, rel=1e-4)


@pytest.mark.parametrize("method, expected", [
    ("fedper", {"hidden-fitted"}),
    ("cgau", {"hidden-fitted", "hidden-zero"}),
    ("ditto", {"decoded", "personal-fine-tuned"}),
    ("scaffold", {"decoded"}),
    ("waffle-l1", {"factors-all-on", "factors-inferred", "factors-fitted"}),
])
def test_strategies_follow_what_the_method_declares(method: str, expected: set[str]) -> None:
    """FedPer and CGAU keep parameters off the wire, Ditto a personal model, WAFFLe's ablation a
    selection without a prior; SCAFFOLD hides only its control variate, not part of the model."""
    names = {s.name for s in resolve("all", make(method), UP_DOWN, CLIENT_MODEL)}
    assert names == expected


def test_an_update_without_its_downlink_cannot_be_decoded() -> None:
    names = {s.name for s in resolve("all", make("scaffold"), frozenset({"up"}), CLIENT_MODEL)}
    assert names == set()
