"""Single-step gradient matching on the zoo's digits MLP."""

from __future__ import annotations

from collections.abc import Callable

import torch

from fedattack.attacks.data_reconstruction.gradient import (
    MatchSettings,
    gradient_from_update,
    invert_gradient,
)
from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.labels import (
    label_from_gradient,
    output_bias_key,
)
from fedattack.attacks.data_reconstruction.objectives import Forward, State

Model = tuple[Forward, State]  # the fixtures' types (conftest.py)
Images = tuple[torch.Tensor, torch.Tensor]
Client = Callable[..., State]


def test_one_image_one_step_is_recovered_with_its_label(mlp: Model, digits: Images,
                                                        run_client: Client) -> None:
    forward, down = mlp
    x, y = digits
    for i in (0, 1):
        up = run_client(forward, down, x[i:i + 1], y[i:i + 1], epochs=1, batch_size=1, lr=0.1)
        grad = gradient_from_update(down, up)  # lr unknown: the cosine distance ignores scale
        label = label_from_gradient(grad, output_bias_key(down, 10))
        assert label == int(y[i])
        recon = invert_gradient(forward, down, grad, torch.tensor([label]), (1, 8, 8),
                                torch.Generator().manual_seed(0), MatchSettings(steps=300))
        assert recon.shape == (1, 1, 8, 8) and 0 <= recon.min() and recon.max() <= 1
        psnr = score_images(recon, x[i:i + 1]).psnr[0]
        print(f"image {i}: PSNR {psnr:.1f} dB")
        assert psnr > 30


def test_same_seed_same_images(mlp: Model, digits: Images) -> None:
    forward, down = mlp
    x, y = digits
    logits_params = {k: v.clone().requires_grad_(True) for k, v in down.items()}
    loss = torch.nn.functional.cross_entropy(forward(logits_params, x[:2]), y[:2])
    grad = dict(zip(down, torch.autograd.grad(loss, list(logits_params.values()))))
    settings = MatchSettings(steps=20, restarts=2)
    a = invert_gradient(forward, down, grad, y[:2], (1, 8, 8), torch.Generator().manual_seed(5), settings)
    b = invert_gradient(forward, down, grad, y[:2], (1, 8, 8), torch.Generator().manual_seed(5), settings)
    c = invert_gradient(forward, down, grad, y[:2], (1, 8, 8), torch.Generator().manual_seed(6), settings)
    assert torch.equal(a, b) and not torch.equal(a, c)
