"""Images read off a fully connected first layer's update (`unmix`): the span of the images
survives any number of local epochs, and a random update unmixes into nothing like them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.levels import LevelJudge, image_functional, quantisation_error
from fedattack.attacks.data_reconstruction.objectives import Forward, State
from fedattack.attacks.data_reconstruction.unmix import (
    FirstLayer,
    Search,
    dark_pixels,
    first_layer_update,
    order_by_labels,
    unmix,
)

Model = tuple[Forward, State]
Images = tuple[torch.Tensor, torch.Tensor]


def test_three_epochs_of_shuffled_batches_unmix_into_the_images(mlp: Model, digits: Images,
                                                                run_client: Callable[..., State]) -> None:
    forward, down = mlp
    x, y = digits[0][:6], digits[1][:6]
    up = run_client(forward, down, x, y, epochs=3, batch_size=2, lr=0.1)
    layer = first_layer_update(down, up, (1, 8, 8))
    assert layer is not None and layer.bias is not None
    singular = torch.linalg.svdvals(layer.weight)
    assert singular[6] < 1e-4 * singular[0] < singular[5]  # A X^T: one source per image (float32 noise aside)
    dark = dark_pixels(layer.weight.numpy())  # equal columns: the pixels no image of the client lights
    assert dark.any() and (dark == ~(x.flatten(1) > 0).any(0).numpy()).all()
    search = Search(programs=64, levels=16)  # digits have 17 levels, 0..16
    images = unmix(layer, 6, (1, 8, 8), torch.Generator().manual_seed(0), search).images
    assert images is not None
    scores = score_images(images, x)
    print(f"unmixed: PSNR {scores.psnr.tolist()}")
    assert scores.share_recovered >= 0.8  # 5 of 6 exactly (2 of 6 before the dark pixels were pinned at 0)
    loose = unmix(layer, 6, (1, 8, 8), torch.Generator().manual_seed(0), Search(programs=64, slack=1e-4)).images
    assert loose is not None and score_images(loose, x).share_recovered >= 0.8  # a little slack loses nothing here
    ordered = order_by_labels(forward, up, images, y.sort().values)
    assert sorted(ordered.flatten(1).sum(1).tolist()) == sorted(images.flatten(1).sum(1).tolist())


def test_a_random_update_or_too_many_images_unmix_into_nothing(mlp: Model, digits: Images) -> None:
    _, down = mlp
    gen = torch.Generator().manual_seed(1)
    layer = torch.randn(64, 64, generator=gen, dtype=torch.float64)
    bias = torch.randn(64, generator=gen, dtype=torch.float64)
    images = unmix(FirstLayer(layer, bias), 6, (1, 8, 8), torch.Generator().manual_seed(0), Search(programs=64)).images
    scores = score_images(images if images is not None else torch.rand(6, 1, 8, 8), digits[0][:6])
    assert scores.share_recovered == 0.0
    assert unmix(FirstLayer(layer, None), 64, (1, 8, 8), gen, Search(programs=8)).images is None  # no span
    assert first_layer_update(down, {k: v for k, v in down.items() if v.dim() == 1}, (1, 8, 8)) is None
    factorised = first_layer_update({"W_a": torch.zeros(65, 3)}, {"W_a": torch.arange(195.0).view(65, 3)}, (1, 8, 8))
    assert factorised is not None and factorised.weight.shape == (3, 64)  # [x, 1] W_a: the bias row apart
    assert factorised.bias is not None and factorised.bias.tolist() == [192.0, 193.0, 194.0]


def test_a_training_image_has_integer_levels_and_a_mixture_has_not(digits: Images) -> None:
    """The certificate `rank=quantised` trusts: a stored image scaled to its brightest pixel is a
    ratio of integer levels; a mixture of two (what an unlucky linear program returns) is not."""
    x = digits[0][:2].flatten(1).double().numpy()
    for image in x:
        assert quantisation_error(image / image.max()) < 1e-9
    mixture = x[0] + 0.37 * x[1]
    assert quantisation_error(mixture / mixture.max()) > 0.2
    assert quantisation_error(np.zeros(64)) == 1.0  # nothing lit: nothing certified


def test_the_bias_update_fixes_every_image_s_brightness(mlp: Model, digits: Images,
                                                        run_client: Callable[..., State]) -> None:
    """dW = A X~^T and db = A 1 after any local run, so the form y solving (dW std + db mean^T) y = db
    is exactly 1 on each training image (here a made-up normalisation the model would apply; the
    run itself sees raw pixels, so mean 0 and std 1 are the truth and anything else is wrong)."""
    forward, down = mlp
    x, y = digits[0][:6], digits[1][:6]
    up = run_client(forward, down, x, y, epochs=2, batch_size=3, lr=0.1)
    layer = first_layer_update(down, up, (1, 8, 8))
    assert layer is not None and layer.bias is not None
    weight, bias = layer.weight.numpy(), layer.bias.numpy()
    form = image_functional(weight, bias, 6, np.zeros(64), np.ones(64))
    assert form is not None
    flat = x.flatten(1).double().numpy()
    assert np.abs(flat @ form - 1).max() < 1e-3
    wrong = image_functional(weight, bias, 6, np.full(64, 0.5), np.full(64, 2.0))
    assert wrong is None or np.abs(flat @ wrong - 1).max() > 0.1
    judge = LevelJudge("levels", form, levels=16)
    mixture = flat[0] + 0.37 * flat[1]
    assert judge.certified(flat[2] / flat[2].max()) and not judge.certified(mixture / mixture.max())
    assert np.allclose(judge.image(flat[2] / flat[2].max()), flat[2], atol=1e-3)  # back at its own brightness
    noise = np.random.default_rng(0).normal(size=bias.shape)  # a bias update off the weight's span
    assert image_functional(weight, noise, 6, np.zeros(64), np.ones(64)) is None
