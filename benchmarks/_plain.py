"""The client code most FL research and Flower tutorials run: one nn.Module, torch.optim.SGD, a
DataLoader, one client after another. Pure PyTorch (no fedattack import), so the Flower
benchmark, which runs in its own virtual environment, executes exactly this code too.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MnistMLP(nn.Module):
    """The WAFFLe paper's MNIST MLP: 784-200-10 with ReLU (159,010 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 200)
        self.fc2 = nn.Linear(200, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.fc1(x.flatten(1)).relu())


def train_client(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, batch_size: int,
                 lr: float, seed: int) -> int:
    """Local SGD on one client's data, in place; returns the number of steps taken."""
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    steps = 0
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
            steps += 1
    return steps


def average(states: list[dict[str, torch.Tensor]], weights: list[float]) -> dict[str, torch.Tensor]:
    """FedAvg's n_k-weighted mean of the clients' state dicts."""
    total = float(sum(weights))
    return {k: sum(w / total * s[k] for s, w in zip(states, weights)) for k in states[0]}
