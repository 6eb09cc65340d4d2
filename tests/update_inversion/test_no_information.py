"""An update that carries no information about the data (a random one of the same shapes)
recovers nothing better than chance: the attack does not invent its success from its prior."""

from __future__ import annotations

from collections.abc import Callable

import torch

from fedattack.attacks.data_reconstruction.fedavg import UpdateSettings, invert_update
from fedattack.attacks.data_reconstruction.gradient import MatchSettings, invert_gradient
from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.local_run import LocalRecipe
from fedattack.attacks.data_reconstruction.objectives import Forward, State

Model = tuple[Forward, State]  # the fixtures' types (conftest.py)
Images = tuple[torch.Tensor, torch.Tensor]
Client = Callable[..., State]

MARGIN_DB = 2.0


def _chance(truth: torch.Tensor) -> float:
    """The better of two data-free guesses: uniform noise and mid grey."""
    noise = torch.rand(truth.shape, generator=torch.Generator().manual_seed(9))
    return max(score_images(noise, truth).summary()["psnr_mean"],
               score_images(torch.full_like(truth, 0.5), truth).summary()["psnr_mean"])


def _random_like(params: dict[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return {k: scale * torch.randn(v.shape, generator=gen) for k, v in params.items()}


def test_a_random_gradient_recovers_nothing(mlp: Model, digits: Images) -> None:
    forward, down = mlp
    x, y = digits[0][20:24], digits[1][20:24]
    recon = invert_gradient(forward, down, _random_like(down, 0.01), y, (1, 8, 8),
                            torch.Generator().manual_seed(0), MatchSettings(steps=200))
    psnr, chance = score_images(recon, x).summary()["psnr_mean"], _chance(x)
    print(f"random gradient: PSNR {psnr:.1f} dB, chance {chance:.1f} dB")
    assert psnr < chance + MARGIN_DB


def test_a_random_update_recovers_nothing(mlp: Model, digits: Images) -> None:
    forward, down = mlp
    x, y = digits[0][20:24], digits[1][20:24]
    up = {k: v + d for (k, v), d in zip(down.items(), _random_like(down, 0.01).values())}
    recon = invert_update(forward, down, up, y, (1, 8, 8), LocalRecipe(2, 2, 0.1),
                          torch.Generator().manual_seed(0), UpdateSettings(steps=200))
    psnr, chance = score_images(recon, x).summary()["psnr_mean"], _chance(x)
    print(f"random update: PSNR {psnr:.1f} dB, chance {chance:.1f} dB")
    assert psnr < chance + MARGIN_DB


def test_a_simulation_that_overflows_still_returns_finite_images(mlp: Model, digits: Images) -> None:
    """A recipe whose simulated local run overflows (here a learning rate of 1e30) once stopped
    the attack with NaN images in its alignment; the optimiser now keeps its last finite images."""
    forward, down = mlp
    y = digits[1][20:24]
    up = {k: v + d for (k, v), d in zip(down.items(), _random_like(down, 1e3).values())}
    recon = invert_update(forward, down, up, y, (1, 8, 8), LocalRecipe(2, 2, 1e30),
                          torch.Generator().manual_seed(0), UpdateSettings(steps=20))
    assert torch.isfinite(recon).all()
