"""Model inversion over several victims at once (`invert_many`) equals one victim at a time."""

from __future__ import annotations

import pytest
import torch

from fedattack.attacks.model_inversion.inversion import InversionSettings, invert, invert_many
from fedattack.data import load_dataset
from fedattack.federation.train import build_target
from fedattack.rng import generator
from tests.conftest import tiny_spec


@pytest.mark.parametrize("method, loss", [("fedavg", "fredrikson"), ("waffle-ibp", "ce")])
def test_victims_inverted_together_match_one_at_a_time(method: str, loss: str) -> None:
    dataset = load_dataset("digits")
    target = build_target(tiny_spec(method=method), dataset, 10)
    victims = [target.deployed(target.init_server(generator(seed, "init")), {}) for seed in range(3)]
    starts = [torch.rand(target.num_classes, 1, 8, 8, generator=torch.Generator().manual_seed(v)) for v in range(3)]
    settings = InversionSettings(steps=80, lr=5.0, patience=3, loss=loss)
    together = invert_many(target, victims, starts, settings)
    for params, x0, got in zip(victims, starts, together):
        alone = invert(target, params, x0, settings)
        assert got.steps == alone.steps and min(alone.steps) < 80  # some classes stopped early
        torch.testing.assert_close(got.images, alone.images, atol=1e-4, rtol=0)
        assert got.confidence == pytest.approx(alone.confidence, abs=1e-4)
    assert not torch.equal(together[0].images, together[1].images)
    assert invert_many(target, [], [], settings) == []
