"""Images read off a fully connected first layer's update (`unmix`): the span of the images
survives any number of local epochs, and a random update unmixes into nothing like them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from fedattack.attacks.update_inversion.image_metrics import score_images
from fedattack.attacks.update_inversion.objectives import Forward, State
from fedattack.attacks.update_inversion.unmix import (
    Search,
    dark_pixels,
    first_layer_update,
    order_by_labels,
    quantisation_error,
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
    assert layer is not None
    singular = torch.linalg.svdvals(layer)
    assert singular[6] < 1e-4 * singular[0] < singular[5]  # A X^T: one source per image (float32 noise aside)
    dark = dark_pixels(layer.numpy())  # equal columns: the pixels no image of the client lights
    assert dark.any() and (dark == ~(x.flatten(1) > 0).any(0).numpy()).all()
    images = unmix(layer, 6, (1, 8, 8), torch.Generator().manual_seed(0), Search(programs=64)).images
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
    images = unmix(layer, 6, (1, 8, 8), torch.Generator().manual_seed(0), Search(programs=64)).images
    scores = score_images(images if images is not None else torch.rand(6, 1, 8, 8), digits[0][:6])
    assert scores.share_recovered == 0.0
    assert unmix(layer, 64, (1, 8, 8), gen, Search(programs=8)).images is None  # as many images as units: no span
    assert first_layer_update(down, {k: v for k, v in down.items() if v.dim() == 1}, (1, 8, 8)) is None
    factorised = first_layer_update({"W_a": torch.zeros(65, 3)}, {"W_a": torch.ones(65, 3)}, (1, 8, 8))
    assert factorised is not None and factorised.shape == (3, 64)  # [x, 1] W_a: the bias row dropped


def test_a_training_image_has_integer_levels_and_a_mixture_has_not(digits: Images) -> None:
    """The certificate `rank=quantised` trusts: a stored image scaled to its brightest pixel is a
    ratio of integer levels; a mixture of two (what an unlucky linear program returns) is not."""
    x = digits[0][:2].flatten(1).double().numpy()
    for image in x:
        assert quantisation_error(image / image.max()) < 1e-9
    mixture = x[0] + 0.37 * x[1]
    assert quantisation_error(mixture / mixture.max()) > 0.2
    assert quantisation_error(np.zeros(64)) == 1.0  # nothing lit: nothing certified
