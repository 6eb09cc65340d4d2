"""Local training, the reference (sequential) way: one client, one minibatch at a time.

Faster executors must reproduce this loop: the batch order and the per-step noise come from
generators keyed by (seed, round, client), and every minibatch carries per-sample weights (1/B
for a full batch, 1/b for the last partial one) so a batched executor can pad and mask.
Each parameter steps by the optimiser its method declares (`Target.optimizer`; plain SGD at the
recipe's learning rate unless the method says otherwise), with state fresh for each local run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.rng import generator

State = dict[str, torch.Tensor]
Trainer = Callable[[Any, Any, Any, Any], State]  # (target, problem, data, ctx) -> trained params


@dataclass
class Batch:
    """A minibatch with per-sample weights that sum to one (zero for padding)."""

    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor

    def cross_entropy(self, logits: torch.Tensor) -> torch.Tensor:
        return (self.w * F.cross_entropy(logits, self.y, reduction="none")).sum()


def epoch_orders(n: int, epochs: int, seed: int, rnd: int, client: int) -> list[torch.Tensor]:
    """The client's shuffled sample order for each local epoch of this round."""
    gen = generator(seed, "batches", rnd, client)
    return [torch.randperm(n, generator=gen) for _ in range(epochs)]


def step_batches(n: int, epochs: int, batch_size: int, seed: int, rnd: int,
                 client: int) -> list[torch.Tensor]:
    """Index tensors of every local step, in order."""
    steps: list[torch.Tensor] = []
    for order in epoch_orders(n, epochs, seed, rnd, client):
        steps.extend(order[i:i + batch_size] for i in range(0, n, batch_size))
    return steps


def draw_noise(shapes: dict[str, tuple[int, ...]], gen: torch.Generator) -> State:
    return {k: torch.rand(s, generator=gen) for k, s in shapes.items()}


def sequential_train(target: Any, problem: Any, data: Any, ctx: Any) -> State:
    """The declared optimisers (plain SGD by default) on `target.local_loss`, minibatch by minibatch."""
    recipe = target.recipe
    params = {k: v.detach().clone().requires_grad_(True) for k, v in problem.params.items()}
    opts = {k: target.optimizer(k) for k in params}
    states = {k: optim.init_state(opts[k], v) for k, v in problem.params.items()}
    noise_gen = generator(ctx.seed, "noise", ctx.round, ctx.client)
    shapes = target.noise_shapes(problem)
    steps = step_batches(data.size, recipe.epochs, recipe.batch_size, ctx.seed, ctx.round, ctx.client)
    for step, idx in enumerate(steps):
        batch = Batch(data.x_train[idx], data.y_train[idx], torch.full((len(idx),), 1.0 / len(idx)))
        noise = draw_noise(shapes, noise_gen)
        grads = local_gradients(target, params, problem.consts, batch, noise, torch.tensor(step), ctx)
        params = {
            k: (optim.step(opts[k], p.detach(), g, states[k], step + 1) if g is not None else p)
            .detach().requires_grad_(True)
            for (k, p), g in zip(params.items(), grads)
        }
    return {k: v.detach() for k, v in params.items()}


def local_gradients(target: Any, params: State, consts: State, batch: Batch, noise: State,
                    step: torch.Tensor, ctx: Any) -> tuple[torch.Tensor | None, ...]:
    """One step's gradient of every local parameter (None: unused by the loss): the method's
    (`Target.local_gradients`, autograd of its loss), or, where a defence trains the clients
    itself (`Defence.trains_locally`: DP-SGD's per-sample clipping and noise), that defence's.
    Such a method does not train in stacks (`Target.trains_in_stacks`), so this loop is the
    only one that trains it."""
    trainer = next((d for d in target.defences if d.trains_locally), None)
    if trainer is not None:
        return tuple(trainer.local_gradients(target, params, consts, batch, noise, step, ctx))
    return tuple(target.local_gradients(params, consts, batch, noise, step, ctx))


def minibatches(n: int, epochs: int, batch_size: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Index tensors of `epochs` shuffled passes over n samples, one permutation drawn per epoch.

    For the adversary's own training (fitting hidden parts, the evaluation classifier): the
    permutations are drawn lazily, so a caller that also draws from `gen` between epochs keeps
    the same stream as a hand-written loop would.
    """
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            yield order[i:i + batch_size]
