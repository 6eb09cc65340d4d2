"""A differentiable copy of the client's local run (`fedattack.training.sequential_train`'s plain
SGD, batch-mean cross-entropy, optional FedProx pull), as a function of the images.

The adversary does not know the order of the samples inside each epoch, so the simulation takes
one copy of the images per epoch and cuts every copy into batches in its own fixed order; the
free copies absorb the unknown shuffles (Dimitrov et al. 2022) and an epoch prior (`fedavg`)
ties them back to one set of images.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from fedattack.attacks.data_reconstruction.objectives import (
    Forward,
    State,
    parameter_gradient,
)


@dataclass(frozen=True)
class LocalRecipe:
    """What the adversary assumes the client ran: epochs E, batch size B, SGD step lr, FedProx mu.

    `segment` is not the client's: the most simulated steps whose graph is held at once (None:
    all). The run is then recomputed segment by segment during the backward (activation
    checkpointing): the same numbers, bit for bit, in memory that grows with the segment, for
    about a third more time (`attacks.planning.cost`; the planner sets it from the memory budget)."""

    epochs: int
    batch_size: int
    lr: float
    mu: float = 0.0
    segment: int | None = None

    def num_steps(self, n: int) -> int:
        """Local SGD steps on n samples; 1 means the update is one gradient (`gradient.py`)."""
        return self.epochs * len(batch_slices(n, self.batch_size))


def batch_slices(n: int, batch_size: int) -> list[slice]:
    """Consecutive batches of one epoch, the last one partial (weights 1/b, as the client's)."""
    return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]


def epoch_labels(labels: torch.Tensor, epochs: int) -> torch.Tensor:
    """Labels per epoch copy, (E, N) or (E, N, C) soft: one arrangement repeated when given once."""
    hard_once = labels.dim() == 1
    soft_once = labels.dim() == 2 and labels.is_floating_point()
    return labels.expand(epochs, *labels.shape) if hard_once or soft_once else labels


def simulate_local_run(forward: Forward, down: Mapping[str, torch.Tensor], copies: torch.Tensor,
                       labels: torch.Tensor, recipe: LocalRecipe,
                       held: Mapping[str, torch.Tensor] | None = None) -> State:
    """The client's weights after E epochs over `copies` (E, N, *shape), differentiable in the
    copies (and in soft labels): every step keeps its graph for the outer optimiser.

    `held`: further inputs of `forward` the simulated client does not train (a hidden factor
    selection the adversary guesses or optimises); they keep whatever graph they carry."""
    if copies.shape[0] != recipe.epochs:
        raise ValueError(f"{copies.shape[0]} epoch copies for a recipe of {recipe.epochs} epochs")
    per_epoch = epoch_labels(labels, recipe.epochs)
    anchor = {k: v.detach() for k, v in down.items()}
    params: State = {k: v.detach().requires_grad_(True) for k, v in down.items()}
    keys = list(params)
    steps = [(epoch, part) for epoch in range(recipe.epochs)
             for part in batch_slices(copies.shape[1], recipe.batch_size)]

    def run(chunk: list[tuple[int, slice]], params: State, extra: Mapping[str, torch.Tensor],
            images: torch.Tensor = copies, targets: torch.Tensor = per_epoch) -> State:
        for epoch, part in chunk:
            grads = parameter_gradient(forward, {**extra, **params}, images[epoch, part], targets[epoch, part], keys)
            params = {k: params[k] - recipe.lr * (grads[k] + recipe.mu * (params[k] - anchor[k])) for k in keys}
        return params

    if recipe.segment is None or recipe.segment >= len(steps):
        return run(steps, params, held or {})
    extra_keys = list(held or {})

    def segment(chunk: list[tuple[int, slice]], images: torch.Tensor, targets: torch.Tensor,
                *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.enable_grad():  # the client's own gradients, inside a forward run without a graph
            start = {k: v if v.requires_grad else v.detach().requires_grad_(True) for k, v in zip(keys, flat)}
            done = run(chunk, start, dict(zip(extra_keys, flat[len(keys):])), images, targets)
        return tuple(done[k] for k in keys)

    # Reentrant checkpointing (the non-reentrant kind keeps the inner gradients' graphs): every
    # tensor a gradient flows to is an explicit input, and the caller backpropagates with
    # `.backward()` (torch refuses `autograd.grad` through it).
    flat = tuple(params[k] for k in keys)
    extras = tuple((held or {})[k] for k in extra_keys)
    for i in range(0, len(steps), recipe.segment):
        flat = checkpoint(segment, steps[i:i + recipe.segment], copies, per_epoch, *flat, *extras,
                          use_reentrant=True)
    return dict(zip(keys, flat))
