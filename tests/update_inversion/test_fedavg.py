"""Multi-step FedAvg/FedProx update inversion: the simulation is the client's run, and inverting
2 epochs of 2 batches of 2 images beats random images clearly."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fedattack.attacks.data_reconstruction.fedavg import (
    UpdateSettings,
    align,
    epoch_prior,
    invert_update,
)
from fedattack.attacks.data_reconstruction.image_metrics import score_images
from fedattack.attacks.data_reconstruction.labels import (
    estimate_label_counts,
    output_bias_key,
)
from fedattack.attacks.data_reconstruction.local_run import LocalRecipe, simulate_local_run
from fedattack.attacks.data_reconstruction.objectives import Forward, State
from fedattack.training import epoch_orders

Model = tuple[Forward, State]  # the fixtures' types (conftest.py)
Images = tuple[torch.Tensor, torch.Tensor]
Client = Callable[..., State]


@pytest.mark.parametrize("mu", [0.0, 0.5])
def test_simulation_in_the_true_order_is_the_clients_run(mlp: Model, digits: Images, run_client: Client,
                                                        mu: float) -> None:
    forward, down = mlp
    x, y = digits[0][:5], digits[1][:5]
    up = run_client(forward, down, x, y, epochs=2, batch_size=2, lr=0.1, mu=mu)
    orders = epoch_orders(5, 2, 0, 0, 0)  # the orders client_run's step_batches used
    copies = torch.stack([x[o] for o in orders])
    labels = torch.stack([y[o] for o in orders])
    assert LocalRecipe(2, 2, 0.1).num_steps(5) == 6 and LocalRecipe(1, 10, 0.1).num_steps(5) == 1
    after = simulate_local_run(forward, down, copies, labels, LocalRecipe(2, 2, 0.1, mu))
    for k in up:
        assert torch.allclose(after[k], up[k], atol=1e-6)
    wrong = simulate_local_run(forward, down, copies.flip(1), labels, LocalRecipe(2, 2, 0.1, mu))
    assert not torch.allclose(wrong["fc1.weight"], up["fc1.weight"], atol=1e-6)


def test_alignment_respects_labels() -> None:
    gen = torch.Generator().manual_seed(0)
    first = torch.rand((4, 1, 8, 8), generator=gen)
    perm = torch.tensor([2, 0, 3, 1])
    copies = torch.stack([first, first[perm]])
    classes = torch.tensor([[0, 0, 1, 1], [1, 0, 1, 0]])
    assert torch.equal(align(copies, classes)[1], torch.tensor([1, 3, 0, 2]))
    # with labels forbidding the true pairs, the assignment must pair within labels
    other = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 1]])
    order = align(copies, other)[1]
    assert torch.equal(other[1][order], other[0])


def test_alignment_survives_an_overflowed_copy() -> None:
    """A NaN image (a diverged simulation) once made the assignment raise; it now gets an order
    that still pairs within labels, and the finite images keep their true partners."""
    gen = torch.Generator().manual_seed(0)
    first = torch.rand((4, 1, 8, 8), generator=gen)
    second = first[torch.tensor([2, 0, 3, 1])].clone()
    second[3] = float("nan")  # the copy of first[1]
    classes = torch.tensor([[0, 1, 2, 3], [2, 0, 3, 1]])
    order = align(torch.stack([first, second]), classes)[1]
    assert torch.equal(classes[1][order], classes[0]) and torch.equal(order, torch.tensor([1, 3, 0, 2]))


@pytest.mark.parametrize("kind", ["matching", "moments"])
def test_epoch_priors_ignore_order_but_not_content(kind: str) -> None:
    gen = torch.Generator().manual_seed(0)
    first = torch.rand((4, 1, 8, 8), generator=gen)
    classes = torch.tensor([0, 1, 2, 3]).expand(3, 4)
    shuffled = torch.stack([first, first[torch.tensor([2, 0, 3, 1])], first.flip(0)])
    shuffled_classes = torch.stack([classes[0], classes[0][torch.tensor([2, 0, 3, 1])], classes[0].flip(0)])
    assert float(epoch_prior(shuffled, align(shuffled, shuffled_classes), kind)) < 1e-12
    different = torch.stack([first, torch.rand((4, 1, 8, 8), generator=gen), first])
    assert float(epoch_prior(different, align(different, classes), kind)) > 1e-3


def _psnr(recon: torch.Tensor, truth: torch.Tensor) -> float:
    return score_images(recon, truth).summary()["psnr_mean"]


def test_two_epochs_of_two_batches_of_two_beat_random_images(mlp: Model, digits: Images,
                                                             run_client: Client) -> None:
    forward, down = mlp
    x, y = digits[0][10:14], digits[1][10:14]
    recipe = LocalRecipe(epochs=2, batch_size=2, lr=0.1)
    up = run_client(forward, down, x, y, epochs=2, batch_size=2, lr=0.1)
    gen = torch.Generator().manual_seed(0)
    known = invert_update(forward, down, up, y, (1, 8, 8), recipe, gen, UpdateSettings(steps=300))
    counted = estimate_label_counts(forward, down, up, 4, lr=0.1, epochs=2, batch_size=2,
                                    input_shape=(1, 8, 8), gen=gen, bias_key=output_bias_key(down, 10))
    unknown = invert_update(forward, down, up, counted.labels, (1, 8, 8), recipe, gen,
                            UpdateSettings(steps=300))
    random = _psnr(torch.rand(x.shape, generator=torch.Generator().manual_seed(1)), x)
    grey = _psnr(torch.full_like(x, 0.5), x)
    print(f"PSNR: labels known {_psnr(known, x):.1f} dB, labels counted {_psnr(unknown, x):.1f} dB "
          f"(counts exact: {torch.equal(counted.labels, y.sort().values)}), random {random:.1f}, "
          f"grey {grey:.1f}")
    assert _psnr(known, x) > max(random, grey) + 10
    assert _psnr(unknown, x) > max(random, grey) + 10
    assert score_images(known, x).share_recovered >= 0.25


def test_same_seed_same_images_and_one_hot_rows_act_as_labels(mlp: Model, digits: Images,
                                                               run_client: Client) -> None:
    forward, down = mlp
    x, y = digits[0][:4], digits[1][:4]
    recipe = LocalRecipe(epochs=2, batch_size=2, lr=0.1)
    up = run_client(forward, down, x, y, epochs=2, batch_size=2, lr=0.1)
    settings = UpdateSettings(steps=15, realign_every=5)

    def invert(labels: torch.Tensor, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return invert_update(forward, down, up, labels, (1, 8, 8), recipe, gen, settings)

    first = invert(y, 0)
    assert torch.equal(first, invert(y, 0)) and not torch.equal(first, invert(y, 1))
    one_hot = torch.nn.functional.one_hot(y, 10).float()
    assert torch.allclose(invert(one_hot, 0), first, atol=1e-4)
    per_epoch = invert(torch.stack([y, y]), 0)
    assert torch.equal(per_epoch, first)
