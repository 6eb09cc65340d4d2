"""A hand-written batched step for the commonest case: plain cross-entropy on an MLP.

`vmap(grad(local_loss))` works for every target but materialises each gradient and then
updates the parameters out of it: for the MNIST MLP that is three passes over the stacked
784x200 weights per step, and measured here (benchmarks/bench_step.py) it costs about twice
the CPU time of writing the weight gradient straight into the weights with `baddbmm_`. So when
a target trains the zoo's MLP (only `nn.Linear` layers) with the default loss, no noise and
plain SGD at the recipe's learning rate,
the step is done by hand: forward with `baddbmm`, backward of weighted cross-entropy, and an
in-place update `W -= lr * dZ^T X`. Same mathematics as the sequential loop; the test suite
holds it to the sequential executor like every other path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedattack.federation.executor_plugins._proximal import Pull, plain_or_pulled
from fedattack.models.zoo.mlp import MLP
from fedattack.optim import is_plain_sgd
from fedattack.target import LocalProblem, State, Target


def mlp_layers(target: Target, problem: LocalProblem) -> list[str] | None:
    """The MLP's layer names, in order, if the fast path computes this target's loss exactly."""
    if not plain_or_pulled(target, problem) or type(target).forward is not Target.forward:
        return None
    model = target.model
    if not isinstance(model, MLP) or type(model).forward is not MLP.forward or target.noise_shapes(problem):
        return None
    if not is_plain_sgd({n: target.optimizer(n) for n in problem.params}, target.recipe.lr):
        return None
    layers = [f"fc{i}" for i in range(1, model.depth + 1)]
    if any(type(getattr(model, name)) is not nn.Linear for name in layers):
        return None
    expected = {f"{n}.{p}" for n in layers for p in ("weight", "bias")}
    return layers if set(problem.params) == expected else None


def mlp_step(params: State, layers: list[str], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
             lr: float, pull: Pull | None = None) -> None:
    """One SGD step of every stacked client, in place. x: (C, B, ...), params: (C, ...).
    `pull` (mu, anchors): the step of the loss plus (mu/2)|w - anchor|^2, i.e. the weights
    first shrunk towards their anchors by lr * mu (`_proximal`)."""
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
        weight.baddbmm_(grad.transpose(1, 2), acts[i], alpha=-lr)
        bias.sub_(grad.sum(1).mul_(lr))
        grad = below  # type: ignore[assignment]
