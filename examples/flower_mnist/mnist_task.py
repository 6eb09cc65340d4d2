"""The task of the MNIST Flower app: its data, model, partition and local recipe (no Flower needed).

Every choice here is the one a `fedattack train` command makes (see this folder's README), so
the Flower federation and fedattack's own FedAvg differ only in what each framework does on its
own: the initial weights, each client's batch order, and the order the server adds uplinks in.
`mimic=True` makes the Flower clients use fedattack's initial weights and batch order instead,
to see how close the two frameworks come when nothing random differs.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedattack.data import load_dataset, make_partition
from fedattack.training import step_batches

SEED, CLIENTS, SUBSET = 0, 10, 6000  # 600 images a client: 480 to train on, 120 held out
EPOCHS, BATCH, LR, ROUNDS = 5, 10, 0.04, 15


def load(root: Path | str | None) -> tuple[torch.Tensor, ...]:
    """A seeded 6,000-image subset of MNIST's train split, and MNIST's whole test split."""
    return _subset(str(root) if root else "")


@cache
def _subset(root: str) -> tuple[torch.Tensor, ...]:
    mnist = load_dataset("mnist", root or None)
    keep = torch.as_tensor(np.random.default_rng(SEED).permutation(len(mnist.y_train))[:SUBSET])
    return mnist.x_train[keep], mnist.y_train[keep], mnist.x_test, mnist.y_test


class Net(nn.Module):
    """784-200-10 with ReLU: the architecture of fedattack's `mnist-mlp`, written as a user would."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 200), nn.Linear(200, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.fc1(x.flatten(1)).relu())


@cache
def partition(root: str = "") -> tuple[list[np.ndarray], list[np.ndarray]]:
    """fedattack's `iid` partition of the subset into CLIENTS (train and local test indices)."""
    labels = _subset(root)[1]
    part = make_partition("iid", labels, CLIENTS, SEED)
    return [c.train for c in part.clients], [c.test for c in part.clients]


def train_locally(model: nn.Module, x: torch.Tensor, y: torch.Tensor, rnd: int, client: int,
                  mimic: bool = False) -> None:
    """EPOCHS of minibatch SGD on the client's data, reshuffled each epoch (mean cross-entropy)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    if mimic:  # fedattack's own batch order for (seed, round, client)
        batches = step_batches(len(y), EPOCHS, BATCH, SEED, rnd, client)
    else:  # the app's own shuffling, as any PyTorch user writes it
        gen = torch.Generator().manual_seed(SEED * 1_000_003 + rnd * 1009 + client)
        batches = [b for _ in range(EPOCHS) for b in torch.randperm(len(y), generator=gen).split(BATCH)]
    for idx in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()


def initial_state(mimic: bool = False) -> dict[str, torch.Tensor]:
    """The server's starting weights: PyTorch's default init after a seed, or fedattack's init."""
    if mimic:
        from fedattack.rng import generator
        from fedattack.target import initial_weights
        return initial_weights(Net(), generator(SEED, "init"))
    torch.manual_seed(SEED)
    return Net().state_dict()
