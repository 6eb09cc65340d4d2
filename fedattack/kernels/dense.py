"""The `dense` kernel: plain cross-entropy (and a proximal pull) on the zoo's MLP, by SGD.

`vmap(grad(local_loss))` works for every method but materialises each gradient and then
updates the parameters out of it: for the MNIST MLP that is three passes over the stacked
784x200 weights per step, and measured here (benchmarks/bench_step.py) it costs about twice
the CPU time of writing the weight gradient straight into the weights with `baddbmm_`. So
where a method declares that it trains the model's cross-entropy (`Target.local_objective`) on
a plain MLP, by plain SGD at the recipe's learning rate, the step is done by hand: forward with
`baddbmm`, backward of the weighted cross-entropy, and an in-place update `W -= lr * dZ^T X`.
Same mathematics as the sequential loop; the test suite holds it to the sequential executor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.kernels.base import Chunking, Stack, State, StepKernel, gather
from fedattack.kernels.proximal import Pull, first, pull_of
from fedattack.models.zoo.mlp import DenseLayout

# On a CPU this step is bound by moving the stacked weights through the caches: measured on the
# 2-core machine (FedAvg, MNIST MLP, 50 clients a round), groups of 5-10 clients ran 25-35%
# faster per CPU second than all 50 at once; the stacks run side by side in threads.
CPU_GROUP = 8


def computes(layout: DenseLayout) -> bool:
    """Whether `mlp_step` computes an MLP laid out as `layout`: biased layers with ReLU between,
    none after the last, no normalisation."""
    return layout.activation == "relu" and layout.norm is None and all(bias for _, bias in layout.layers)


class DenseKernel(StepKernel):
    """Every step of a stack of MLPs written out: `layers` (fc1, fc2, ...) in order."""

    label = "dense"

    def __init__(self, layers: tuple[str, ...], proximal: float) -> None:
        self.layers, self.proximal = list(layers), proximal

    def chunking(self, options: frozenset[str]) -> Chunking:
        return Chunking(group=CPU_GROUP, thread_min=1)

    def train(self, stack: Stack) -> None:
        lr = stack.target.recipe.lr
        pull = pull_of(self.proximal, stack.consts)
        x = stack.target.normalized(stack.x)  # the step reads x itself, not through forward
        for s, a in enumerate(stack.active):
            r = stack.rows[s, :a]
            mlp_step({k: v[:a] for k, v in stack.params.items()}, self.layers, gather(x, r), stack.y[r],
                     stack.weights[s, :a], lr, first(pull, a))


def mlp_step(params: State, layers: list[str], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
             lr: float, pull: Pull | None = None) -> None:
    """One SGD step of every stacked client, in place. x: (C, B, ...), params: (C, ...).
    `pull` (mu, anchors): the step of the loss plus (mu/2)|w - anchor|^2, i.e. the weights
    first shrunk towards their anchors by lr * mu."""
    acts = [x.flatten(2)]
    pre: list[torch.Tensor] = []
    for i, name in enumerate(layers):
        z = torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), acts[-1],
                          params[f"{name}.weight"].transpose(1, 2))
        pre.append(z)
        if i < len(layers) - 1:
            acts.append(z.relu())
    logits = pre[-1]
    grad = (logits.softmax(-1) - F.one_hot(y, logits.shape[-1]).to(logits.dtype)) * w.unsqueeze(-1)
    for i in range(len(layers) - 1, -1, -1):
        weight, bias = params[f"{layers[i]}.weight"], params[f"{layers[i]}.bias"]
        below = (grad.bmm(weight) * (pre[i - 1] > 0)) if i > 0 else None
        if pull is not None:  # w - lr mu (w - a), from the weights before this step's update
            for name in (f"{layers[i]}.weight", f"{layers[i]}.bias"):
                params[name].lerp_(pull[1][name], lr * pull[0])
        optim.sgd_product_(weight, grad.transpose(1, 2), acts[i], lr)
        optim.step_(optim.SGD(lr), bias, grad.sum(1), {}, 1)
        grad = below  # type: ignore[assignment]
