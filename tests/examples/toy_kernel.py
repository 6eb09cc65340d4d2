"""An example of a contributor's fast kernel, in the same one file as their method.

`decay-avg` is FedAvg whose clients train with weight decay, (decay / 2) |w|^2 added to the
cross-entropy, by plain SGD. That is not the objective the built-in kernels compute, so without
a kernel of its own the batched executors would train it through `vmap(grad(local_loss))`. Its
kernel trains a stack of the zoo's MLPs at once, every step one batched forward (`baddbmm` over
the stacked clients), autograd on the sum of the clients' losses (each client's gradient is its
own), and one in-place SGD step; `step_kernel` hands it to the executor, which needs no edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from fedattack.kernels import Chunking, Stack, StepKernel, gather
from fedattack.models.zoo.mlp import MLP
from fedattack.target import LocalProblem, State, Target
from fedattack.training import Batch


@dataclass(frozen=True, kw_only=True)
class DecayHyper:
    """decay: the weight decay's coefficient."""

    decay: float = 0.01


class DecayKernel(StepKernel):
    """Every step of a stack of MLPs trained with weight decay."""

    label = "decay-mlp"
    steps: ClassVar[int] = 0  # stacks trained, counted for the test

    def __init__(self, layers: tuple[str, ...], decay: float) -> None:
        self.layers, self.decay = layers, decay

    def chunking(self, options: frozenset[str]) -> Chunking:
        return Chunking(group=8, thread_min=1)

    def train(self, stack: Stack) -> None:
        DecayKernel.steps += 1
        x, lr = stack.target.normalized(stack.x).flatten(1), stack.target.recipe.lr
        for s, a in enumerate(stack.active):
            r = stack.rows[s, :a]
            leaves = {k: v[:a].detach().requires_grad_(True) for k, v in stack.params.items()}
            h = gather(x, r)
            for i, name in enumerate(self.layers):
                h = torch.baddbmm(leaves[f"{name}.bias"].unsqueeze(1), h, leaves[f"{name}.weight"].transpose(1, 2))
                h = h.relu() if i < len(self.layers) - 1 else h
            ce = F.cross_entropy(h.flatten(0, 1), stack.y[r].flatten(), reduction="none").view(a, -1)
            loss = (stack.weights[s, :a] * ce).sum() + self.decay / 2 * sum((p**2).sum() for p in leaves.values())
            grads = torch.autograd.grad(loss, list(leaves.values()))
            with torch.no_grad():
                for p, g in zip(stack.params.values(), grads):
                    p[:a].sub_(lr * g)


class DecayAvg(Target):
    """FedAvg whose clients train with weight decay; a kernel of its own trains them together."""

    name = "decay-avg"
    paper = "example for contributors"
    Hyper = DecayHyper

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        decay = sum((p**2).sum() for p in params.values())
        return batch.cross_entropy(self.forward(params, batch.x)) + self.hyper.decay / 2 * decay

    def step_kernel(self, problem: LocalProblem) -> StepKernel | None:
        layers = self.model.dense_layers() if isinstance(self.model, MLP) else None
        return None if layers is None else DecayKernel(layers, float(self.hyper.decay))
