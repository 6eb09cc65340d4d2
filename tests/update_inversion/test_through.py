"""Update inversion through convolutional networks (#36): the images read off the first dense
layer's update, through the convolutions before it (`dense`, `through`), labels unknown.

Digits (8x8) through the zoo's Dimitrov et al. CNN (3x3 convs 32 and 64, average pooling, dense
100): an eavesdropper's adversary (downlink, uplink, recipe, sample count; no labels), the real
images handed to the scorer only afterwards.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from fedattack.attacks.data_reconstruction.dense import dense_layer
from fedattack.attacks.data_reconstruction.local_run import LocalRecipe, simulate_local_run
from fedattack.attacks.evaluation.data import Samples
from fedattack.data import load_dataset
from fedattack.registry import ATTACKS, UserError
from fedattack.target import Recipe, State, Target, initial_weights
from tests.attacks.test_update_inversion_attack import adversary, chance_db
from tests.conftest import build


@pytest.fixture(scope="module")
def digits() -> Samples:
    data = load_dataset("digits")
    return Samples(data.x_train[:12], data.y_train[:12])


def cnn_client(digits: Samples, n: int, epochs: int, batch_size: int, lr: float) -> tuple[Target, State, State]:
    """A Dimitrov-CNN client's run on the first n digits from the seeded initialisation."""
    target = build("fedavg", model="dimitrov-cnn", recipe=Recipe(epochs=epochs, batch_size=batch_size, lr=lr))
    down = initial_weights(target.model, torch.Generator().manual_seed(0))
    copies = digits.x[:n].expand(epochs, n, *digits.x.shape[1:])
    after = simulate_local_run(target.forward, down, copies, digits.y[:n], LocalRecipe(epochs, batch_size, lr))
    return target, down, {k: v.detach() for k, v in after.items()}


def invert(target: Target, down: State, up: State, n: int, digits: Samples, **settings: Any) -> Any:
    chosen = ATTACKS.get("update-inversion").from_options({"start": "first-layer", "labels": "recovered",
                                                           "iterations": 200, **settings})
    guesses = chosen.run(adversary(target, down, up, n), torch.Generator().manual_seed(0))
    truth: Any = SimpleNamespace(members=Samples(digits.x[:n], digits.y[:n]), deployed={})
    return guesses, chosen.score(guesses, truth)


def test_the_dense_layer_after_the_convolutions_is_found_and_its_features_evaluated(digits: Samples) -> None:
    target, down, up = cnn_client(digits, 2, 1, 2, 0.01)
    dense = dense_layer(target, down, up, (1, 8, 8))
    assert dense is not None and dense.weight_key == "fc1.weight" and not dense.on_pixels
    assert dense.inputs == 64 * 2 * 2 and dense.update.weight.shape == (100, 256)
    features = dense.features(target)(down, digits.x[:3])
    assert features.shape == (3, 256) and (features >= 0).all()  # post-ReLU, average-pooled
    mlp = build("fedavg")
    mlp_down = initial_weights(mlp.model, torch.Generator().manual_seed(0))
    first = dense_layer(mlp, mlp_down, {k: v + 1 for k, v in mlp_down.items()}, (1, 8, 8))
    assert first is not None and first.on_pixels  # an MLP's first layer sees the pixels


def test_one_image_through_a_one_step_cnn_update_is_recovered_above_25_db(digits: Samples) -> None:
    target, down, up = cnn_client(digits, 1, 1, 1, 0.01)
    guesses, scored = invert(target, down, up, 1, digits)
    print(f"one image, one step: {scored.metrics['psnr_mean']:.1f} dB; {guesses.info['inverted_by']}")
    assert guesses.info["inverted_by"].startswith("fc1.weight's update through the layers before it")
    assert scored.metrics["psnr_mean"] > 25 and scored.metrics["label_accuracy"] == 1.0


def test_several_images_through_several_cnn_steps(digits: Samples) -> None:
    """6 images, 2 epochs of batches of 2 (6 steps, the features drifting between them)."""
    target, down, up = cnn_client(digits, 6, 2, 2, 0.01)
    guesses, scored = invert(target, down, up, 6, digits)
    print(f"6 images, 6 steps: {scored.metrics['share_recovered']:.2f} above 20 dB, "
          f"{scored.metrics['psnr_mean']:.1f} dB, labels {scored.metrics['label_accuracy']:.2f}")
    assert scored.metrics["share_recovered"] >= 2 / 6  # 3 of 6 measured, 23.5 dB mean


def test_a_random_cnn_update_recovers_nothing_better_than_chance(digits: Samples) -> None:
    target, down, real_up = cnn_client(digits, 4, 1, 4, 0.01)
    gen = torch.Generator().manual_seed(1)
    up = {k: v + (real_up[k] - v).std() * torch.randn(v.shape, generator=gen) for k, v in down.items()}
    guesses, scored = invert(target, down, up, 4, digits)
    chance = chance_db(digits.x[:4], gen)
    print(f"random CNN update: {scored.metrics['psnr_mean']:.1f} dB, chance {chance:.1f} dB")
    assert scored.metrics["psnr_mean"] < chance + 2 and scored.metrics["share_recovered"] == 0.0


def test_labels_are_counted_from_a_cnn_update(digits: Samples) -> None:
    """12 images, 2 epochs of batches of 4 (6 steps): the output bias's update counts them."""
    target, down, up = cnn_client(digits, 12, 2, 4, 0.01)
    guesses, scored = invert(target, down, up, 12, digits, iterations=2)
    print(f"labels of 12 images after 6 CNN steps: {scored.metrics['label_accuracy']:.2f} "
          f"(counts {guesses.info['labels']['counts']}, true {torch.bincount(digits.y[:12], minlength=10).tolist()})")
    assert scored.metrics["label_accuracy"] >= 0.75


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: cuda is a valid device here")
def test_a_device_torch_cannot_see_is_refused_in_one_line() -> None:
    with pytest.raises(UserError, match="device 'cuda': use cpu, or cuda where a GPU is visible"):
        ATTACKS.get("update-inversion").from_options({"device": "cuda"})


def test_waffles_factorised_cnn_is_read_at_its_first_dense_layer_not_a_convolution() -> None:
    """WAFFLe factorises the convolutions too: each holds a `W_a` as the dense layers do, so the
    first factorised module is a convolution; the reading must skip it (it once took conv1)."""
    target = build("waffle-ibp", model="cifar-cnn", shape=(3, 32, 32))
    down = initial_weights(target.model, torch.Generator().manual_seed(0))
    up = {k: v + 0.01 for k, v in down.items()}
    dense = dense_layer(target, down, up, (3, 32, 32))
    assert dense is not None and dense.module == "fc1" and dense.weight_key == "fc1.W_a"
    assert dense.inputs == 16 * 6 * 6 and not dense.on_pixels  # 32 -> conv 30 -> pool 15 -> conv 13 -> pool 6
