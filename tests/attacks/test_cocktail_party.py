"""The cocktail party attack (Kariyappa et al. 2023): a one-step aggregated gradient of 64 MNIST
images through a wide dense layer is unmixed into its images well above chance, and a random
update of the same shapes gives chance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

from fedattack.attacks.data_reconstruction.cocktail import PixelPrior, separate, unmixable
from fedattack.data import load_dataset
from tests.conftest import data_root

IMAGES, UNITS = 64, 512


def matched_correlation(found: np.ndarray, real: np.ndarray) -> np.ndarray:
    """|correlation| of each real image with the component assigned to it (one to one, the
    assignment of highest total)."""
    def z(a: np.ndarray) -> np.ndarray:
        return (a - a.mean(1, keepdims=True)) / np.maximum(a.std(1, keepdims=True), 1e-12)
    corr = np.abs(z(found) @ z(real).T / real.shape[1])
    rows, cols = linear_sum_assignment(-corr)
    return corr[rows, cols]


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray, PixelPrior]:
    """One aggregated gradient of 64 MNIST images through a 512-unit ReLU layer, at a seeded
    initialisation, the images, and the prior from other MNIST images."""
    root = data_root()
    if root is None:
        pytest.skip("set FEDATTACK_DATA to the shared datasets folder (MNIST)")
    data = load_dataset("mnist", str(root))
    torch.manual_seed(0)
    x, y = data.x_train[:IMAGES].flatten(1), data.y_train[:IMAGES]
    fc1, fc2 = torch.nn.Linear(x.shape[1], UNITS), torch.nn.Linear(UNITS, data.num_classes)
    loss = F.cross_entropy(fc2(fc1(x).relu()), y)
    grad = torch.autograd.grad(loss, fc1.weight)[0]
    return grad.double().numpy(), x.double().numpy(), PixelPrior.of(data.x_test[:500].numpy())


def test_an_aggregated_gradient_is_separated_into_its_images(batch: tuple[np.ndarray, np.ndarray, PixelPrior]) -> None:
    grad, real, prior = batch
    found = separate(grad, IMAGES, 0, prior, (1, 28, 28))
    assert found.images is not None and found.images.shape == real.shape
    assert 0.0 <= found.images.min() and found.images.max() <= 1.0
    corr = matched_correlation(found.images, real)
    assert (corr > 0.9).mean() >= 0.4, np.sort(corr)  # measured: 0.73 at 1,024 units


def test_a_random_update_of_the_same_shape_gives_chance(batch: tuple[np.ndarray, np.ndarray, PixelPrior]) -> None:
    grad, real, prior = batch
    noise = np.random.default_rng(0).standard_normal(grad.shape)
    found = separate(noise, IMAGES, 0, prior, (1, 28, 28))
    assert found.images is not None
    corr = matched_correlation(found.images, real)
    assert (corr > 0.9).mean() == 0.0 and corr.mean() < 0.2


def test_a_fedavg_update_of_several_steps_is_separated_too() -> None:
    """One epoch of plain SGD in 8 minibatches of 8: the first layer's update is still A X with one
    row of X per image (each image enters through the step that saw it), so the same unmixing
    reads it."""
    root = data_root()
    if root is None:
        pytest.skip("set FEDATTACK_DATA to the shared datasets folder (MNIST)")
    data = load_dataset("mnist", str(root))
    torch.manual_seed(1)
    x, y = data.x_train[IMAGES:2 * IMAGES].flatten(1), data.y_train[IMAGES:2 * IMAGES]
    fc1, fc2 = torch.nn.Linear(x.shape[1], UNITS), torch.nn.Linear(UNITS, data.num_classes)
    start, params = fc1.weight.detach().clone(), [*fc1.parameters(), *fc2.parameters()]
    for b in torch.randperm(IMAGES).split(8):
        grads = torch.autograd.grad(F.cross_entropy(fc2(fc1(x[b]).relu()), y[b]), params)
        with torch.no_grad():
            for param, g in zip(params, grads):
                param -= 0.1 * g
    update = (start - fc1.weight.detach()).double().numpy()
    found = separate(update, IMAGES, 0, PixelPrior.of(data.x_test[:500].numpy()), (1, 28, 28))
    assert found.images is not None
    corr = matched_correlation(found.images, x.double().numpy())
    assert (corr > 0.9).mean() >= 0.4, np.sort(corr)


def test_it_says_why_it_cannot_separate() -> None:
    assert "more than the first layer's 200 units" in unmixable(200, 784, 480)
    assert "span every image" in unmixable(4096, 784, 1000)
    assert unmixable(1024, 3072, 1000) == ""
    assert separate(np.zeros((10, 64)), 20, 0, PixelPrior(), (1, 8, 8)).images is None


def test_the_default_audit_ranks_it_and_it_says_why_it_leaves_a_workload_out() -> None:
    from types import SimpleNamespace

    from fedattack.attacks.data_reconstruction.cocktail_party import CocktailParty
    from fedattack.attacks.planning.cost import Workload
    from fedattack.attacks.planning.default_audit import ranked

    order = [cls.name for cls in ranked("reconstruction")]
    assert order.index("update-inversion") < order.index("cocktail-party")  # measured stronger where both apply
    assert CocktailParty.audit is not None and CocktailParty.audit.complements  # so it runs beside it

    def work(samples: int, first_layer: tuple[int, int] | None) -> Workload:
        probe = SimpleNamespace(input_numel=784)
        return Workload(samples, 1, 1, 0, 0, 10, 1, 32, probe, first_layer)  # type: ignore[arg-type]

    attack = CocktailParty()
    assert attack.for_audit(work(256, (1024, 784))) == {}
    assert "not fully connected" in str(attack.for_audit(work(50, None)))
    assert "more than the first layer's 200 units" in str(attack.for_audit(work(480, (200, 784))))
    assert attack.cost(work(256, (1024, 784))).seconds > attack.cost(work(64, (1024, 784))).seconds
