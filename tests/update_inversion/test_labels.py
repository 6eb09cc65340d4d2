"""Label recovery from an update: exact for one image and one step, counts for a batch."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from fedattack.attacks.data_reconstruction.labels import (
    count_accuracy,
    estimate_label_counts,
    label_from_gradient,
    output_bias_key,
)
from fedattack.attacks.data_reconstruction.objectives import Forward, State

Model = tuple[Forward, State]  # the fixtures' types (conftest.py)
Images = tuple[torch.Tensor, torch.Tensor]
Client = Callable[..., State]


def test_one_image_one_step_gives_the_label_exactly(mlp: Model, digits: Images, run_client: Client) -> None:
    forward, down = mlp
    x, y = digits
    key = output_bias_key(down, 10)
    for i in range(10):
        up = run_client(forward, down, x[i:i + 1], y[i:i + 1], epochs=1, batch_size=1, lr=0.1)
        grad = {k: (down[k] - up[k]) / 0.1 for k in down}
        assert label_from_gradient(grad, key) == int(y[i])


def _counts_accuracy(forward: Forward, down: State, x: torch.Tensor, y: torch.Tensor, run_client: Client,
                     epochs: int, batch_size: int) -> float:
    up = run_client(forward, down, x, y, epochs=epochs, batch_size=batch_size, lr=0.1)
    est = estimate_label_counts(forward, down, up, len(x), lr=0.1, epochs=epochs, batch_size=batch_size,
                                input_shape=(1, 8, 8), gen=torch.Generator().manual_seed(0),
                                bias_key=output_bias_key(down, 10))
    assert int(est.counts.sum()) == len(x) and len(est.labels) == len(x)
    return count_accuracy(est.counts, torch.bincount(y, minlength=10))


def test_label_counts_of_a_batch_of_ten(mlp: Model, digits: Images, run_client: Client) -> None:
    forward, down = mlp
    x, y = digits
    # classes 0..9 with repeats: counts 3,2,2,1,1,1,0,0,0,0
    idx = torch.cat([torch.nonzero(y == c)[:n, 0] for c, n in enumerate([3, 2, 2, 1, 1, 1])])
    one_step = _counts_accuracy(forward, down, x[idx], y[idx], run_client, epochs=1, batch_size=10)
    multi = _counts_accuracy(forward, down, x[idx], y[idx], run_client, epochs=2, batch_size=5)
    print(f"label count accuracy: one step of 10 {one_step:.2f}, 2 epochs of 2x5 {multi:.2f}")
    assert one_step == 1.0
    assert multi >= 0.8


def test_labelled_auxiliary_probes_count_better_on_a_trained_model(mlp: Model, digits: Images,
                                                                   run_client: Client) -> None:
    """Once the model predicts confidently, noise probes misjudge the client's mean softmax;
    per-class means on labelled auxiliary images fix most of it."""
    forward, init = mlp
    x, y = digits
    down = run_client(forward, init, x[:1000], y[:1000], epochs=3, batch_size=20, lr=0.1)
    gen = torch.Generator().manual_seed(0)
    aux = torch.arange(1000, 1100)
    noise, labelled = [], []
    for rep in range(5):
        idx = torch.randperm(len(x), generator=gen)[:10]
        up = run_client(forward, down, x[idx], y[idx], epochs=1, batch_size=10, lr=0.1, seed=rep)
        true = torch.bincount(y[idx], minlength=10)
        count = partial(estimate_label_counts, forward, down, up, 10, lr=0.1, epochs=1, batch_size=10,
                        input_shape=(1, 8, 8), gen=gen, bias_key="fc2.bias")
        noise.append(count_accuracy(count().counts, true))
        labelled.append(count_accuracy(count(probes=x[aux], probe_labels=y[aux]).counts, true))
    print(f"trained model, batch of 10: count accuracy noise probes {sum(noise) / 5:.2f}, "
          f"labelled probes {sum(labelled) / 5:.2f}")
    assert sum(labelled) > sum(noise)
    assert sum(labelled) / 5 >= 0.8
